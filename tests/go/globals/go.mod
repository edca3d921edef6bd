module globals

go 1.17
