module gowebhook

go 1.21
