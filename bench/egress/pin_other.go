//go:build !linux

package main

import "errors"

var errNoPinning = errors.New("pinning threads to CPUs is implemented for Linux only")

func usableCPUs() ([]int, error)    { return nil, errNoPinning }
func pinProcess(pid, cpu int) error { return errNoPinning }
func checkPinned(pid, cpu int) error {
	return errNoPinning
}
