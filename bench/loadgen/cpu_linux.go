package main

import "syscall"

// cpuMs is the CPU time (user and system) this process has used so far, in milliseconds: the
// generator shares the machine's cores with the server it measures, so its own cost is printed.
func cpuMs() float64 {
	var usage syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &usage) != nil {
		return -1
	}
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e6
}
