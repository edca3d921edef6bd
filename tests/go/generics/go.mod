module generics

go 1.18
