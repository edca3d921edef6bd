module gomapbench

go 1.17
