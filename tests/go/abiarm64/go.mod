module example.com/abiarm64

go 1.17
