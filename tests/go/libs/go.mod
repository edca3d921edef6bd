module gtrace.test/libs

go 1.22
