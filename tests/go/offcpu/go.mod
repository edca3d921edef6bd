module example.com/offcpu

go 1.17
