module planrun

go 1.17
