package main

import (
	"syscall"
	"time"
)

// sleepUntil waits for due with the kernel's high-resolution timer. The runtime's own timers wake
// through its network poller, whose epoll wait counts in whole milliseconds: at 1,000 requests a
// second that made the generator send 0.6 ms late at the median, and the lateness counted as the
// server's latency. The pacing goroutine holds its own OS thread (see main), so blocking it in
// nanosleep stalls nothing else, and it does not spin a core away from the server it measures.
func sleepUntil(due time.Time) {
	for {
		wait := time.Until(due)
		if wait <= 0 {
			return
		}
		spec := syscall.NsecToTimespec(wait.Nanoseconds())
		syscall.Nanosleep(&spec, nil)
	}
}
