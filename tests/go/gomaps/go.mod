module gomaps

go 1.17
