package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ioTimeout bounds every command the harness itself sends while waiting for
// a state.
const ioTimeout = 2 * time.Second

// respError is an error reply from Redis, such as "LOADING ...".
type respError string

func (e respError) Error() string { return string(e) }

// command sends one command on a fresh connection and returns the reply:
// a string (simple or bulk; nil bulk is ""), an int64, a []any or a
// respError. The harness polls with it rather than with a full client, so
// that waiting on a dying or restarting server has no background state.
func command(addr string, args ...string) (any, error) {
	replies, err := pipeline(addr, args)
	if err != nil {
		return nil, err
	}
	return replies[0], nil
}

// pipeline sends commands on one fresh connection and returns their
// replies, as command does.
func pipeline(addr string, cmds ...[]string) ([]any, error) {
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	replies := make([]any, len(cmds))
	for i := range cmds {
		if replies[i], err = readReply(r); err != nil {
			return nil, err
		}
	}
	return replies, nil
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redistest: empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		items := make([]any, 0, max(n, 0))
		for range n {
			v, err := readReply(r)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return items, nil
	}
	return nil, fmt.Errorf("redistest: unexpected reply %q", line)
}

// commandString runs a command whose reply is a string; an error reply is
// returned as an error.
func commandString(addr string, args ...string) (string, error) {
	v, err := command(addr, args...)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case respError:
		return "", v
	}
	return "", fmt.Errorf("redistest: %s: unexpected reply %v", args[0], v)
}

// info returns the fields of INFO section (or CLUSTER INFO when section is
// "cluster-info") as a map.
func info(addr, section string) (map[string]string, error) {
	args := []string{"INFO", section}
	if section == "cluster-info" {
		args = []string{"CLUSTER", "INFO"}
	}
	text, err := commandString(addr, args...)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]string)
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}
