module godecode

go 1.15
