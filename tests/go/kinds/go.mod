module example.com/kinds

go 1.17
