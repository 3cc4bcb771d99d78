module gexec

go 1.19
