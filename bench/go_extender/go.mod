module goextender

go 1.21
