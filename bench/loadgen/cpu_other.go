//go:build !linux

package main

// cpuMs is unknown off Linux (-1).
func cpuMs() float64 { return -1 }
