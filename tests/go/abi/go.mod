module abi

go 1.22
