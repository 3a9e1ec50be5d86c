module svc-platform/bench/loadgen

go 1.26.0

require github.com/valyala/fasthttp v1.78.0

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
)
