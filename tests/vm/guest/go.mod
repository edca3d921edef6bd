module gtrace.test/vmguest

go 1.22
