module gtrace.dev/benchtarget

go 1.22
