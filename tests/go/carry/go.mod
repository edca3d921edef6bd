module example.com/carry

go 1.17
