module floats

go 1.17
