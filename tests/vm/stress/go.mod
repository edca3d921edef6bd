module gtrace.test/stress

go 1.22
