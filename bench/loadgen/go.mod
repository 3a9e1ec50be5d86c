module svc-platform/bench/loadgen

go 1.22
