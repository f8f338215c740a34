package temporal

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// PortInUseError says that an address the embedded server was asked to listen
// on is already taken. It is returned before anything binds, because both the
// Temporal server and the UI server end the whole process when a listener
// cannot be opened.
type PortInUseError struct {
	// Purpose names what wanted the address, e.g. "frontend" or "UI".
	Purpose string
	// Addr is the host:port that could not be bound.
	Addr string
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("temporal %s address %s is not available (another process is listening on it?): %v", e.Purpose, e.Addr, e.Err)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// IsPortInUse reports whether err says that a requested listen address was taken.
func IsPortInUse(err error) bool {
	var target *PortInUseError
	return errors.As(err, &target)
}

// checkAddrFree binds addr and releases it at once, so that a clash becomes an
// error we return instead of a log.Fatal/os.Exit inside the server libraries.
// There is a short window in which another process could take the port; we
// accept it, since the alternative (handing pre-bound listeners to the
// libraries) is not supported by either of them.
func checkAddrFree(purpose, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			return &PortInUseError{Purpose: purpose, Addr: addr, Err: err}
		}
		return fmt.Errorf("checking temporal %s address %s: %w", purpose, addr, err)
	}
	return l.Close()
}

// freePortAttempts bounds how many free ports availableAddr tries for a
// port-0 address.
const freePortAttempts = 5

// availableAddr is listenAddr followed by checkAddrFree. For port 0 a port
// that another process took between picking and checking (an outgoing
// connection may reuse a port in TIME_WAIT as its source port) is not the
// caller's problem: another free port is picked.
func availableAddr(purpose, addr string) (string, int, error) {
	for attempt := 1; ; attempt++ {
		host, port, err := listenAddr(purpose, addr)
		if err != nil {
			return "", 0, err
		}
		err = checkAddrFree(purpose, net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return host, port, nil
		}
		if !IsPortInUse(err) || !requestsFreePort(addr) || attempt == freePortAttempts {
			return "", 0, err
		}
	}
}

// requestsFreePort reports whether addr asks for any free port (port 0).
func requestsFreePort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// listenAddr validates a host:port option and returns its IP and port, with
// port 0 replaced by a free port so the address handed to the server (and
// shown to users) is the real one. The host must be an IP because the server
// binds services to an IP; "localhost" and "" are taken as 127.0.0.1, since
// the local stack never listens beyond loopback unless told to.
func listenAddr(purpose, addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("temporal %s address %q: %w", purpose, addr, err)
	}
	if host == "localhost" || host == "" {
		host = "127.0.0.1"
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("temporal %s address %q: host must be an IP address", purpose, addr)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("temporal %s address %q: port %q is not a number from 0 to 65535", purpose, addr, portText)
	}
	if port == 0 {
		free, err := freePort(host)
		if err != nil {
			return "", 0, fmt.Errorf("picking a free port for temporal %s on %s: %w", purpose, host, err)
		}
		return host, free, nil
	}
	return host, int(port), nil
}

// freePort asks the kernel for an unused TCP port on host.
//
// Before returning it, it connects to the port and closes the accepted side
// first. That leaves the connection in TIME_WAIT on the server side, and Linux
// does not hand out a port in TIME_WAIT to other bind(:0) calls for a while,
// while we can still bind it ourselves (Go sets SO_REUSEADDR). This shrinks the
// window in which a concurrent test or helper grabs the same port; a clash
// there would make the Temporal server exit the process. (Same technique as
// the Temporal CLI's dev server.)
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	dialed, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	accepted, err := l.Accept()
	if err != nil {
		dialed.Close()
		return 0, err
	}
	// Server side closes first: that side holds the TIME_WAIT.
	accepted.Close()
	dialed.Close()
	return port, nil
}
