module headers

go 1.17
