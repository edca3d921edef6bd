module panics

go 1.17
