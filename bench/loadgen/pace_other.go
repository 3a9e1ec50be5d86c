//go:build !linux

package main

import "time"

// sleepUntil waits for due with the runtime's timer (millisecond-grained where the poller is).
func sleepUntil(due time.Time) {
	if wait := time.Until(due); wait > 0 {
		time.Sleep(wait)
	}
}

// joinRealtimeClass changes nothing off Linux.
func joinRealtimeClass() bool { return false }
