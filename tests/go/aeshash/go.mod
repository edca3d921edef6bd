module aeshash

go 1.17
