package main

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
)

// usageError is a command line ticketctl cannot run: an unknown command or
// flag, a missing or stray argument, a malformed value. It exits exitUsage
// (64, EX_USAGE), apart from every answer of a server, so that a script
// written the etcdctl way never mistakes a typo for "the key is held".
type usageError struct{ err error }

// Error implements error.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the cause.
func (e *usageError) Unwrap() error { return e.err }

// errUsage is a usage error naming the expected form.
func errUsage(form string) error { return &usageError{fmt.Errorf("usage: %s", form)} }

// usagef is a usage error with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// strictUsage makes every usage mistake under root fail with a usageError:
// flag errors, positional-argument errors of every command, and unknown
// subcommands or stray arguments given to a command group ("ticketctl lock
// nosuch", "ticketctl lock KEY -- CMD", "ticketctl members nosuch"), which
// cobra would answer with help and exit 0. A group given no subcommand
// prints its help and fails the same way.
func strictUsage(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%s%w (see %s --help)", where(c), err, c.CommandPath())
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && !c.Runnable():
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, args []string) error { return groupUsage(c, args) }
		case c.Args != nil:
			check := c.Args
			c.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					return usagef("%s%w; usage: %s", where(c), err, c.UseLine())
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// groupUsage is the error of a command group run without a known
// subcommand: it names the subcommands expected and, for "lock KEY -- CMD"
// (consul lock's form), suggests "lock run".
func groupUsage(c *cobra.Command, args []string) error {
	var subs []string
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			subs = append(subs, s.Name())
		}
	}
	want := strings.Join(subs, ", ")
	if len(args) == 0 {
		if !c.HasParent() {
			return c.Help() // bare "ticketctl": help, exit 0
		}
		c.SetOut(c.ErrOrStderr())
		_ = c.Help()
		return usagef("%swant a subcommand: %s", where(c), want)
	}
	if c.Name() == "lock" && c.ArgsLenAtDash() >= 0 {
		return usagef("%sunknown subcommand %q; to run a command under a lock use: %s run KEY -- CMD [ARGS...]",
			where(c), args[0], c.CommandPath())
	}
	return usagef("%sunknown subcommand %q; want one of: %s", where(c), args[0], want)
}

// where names command c at the start of a usage message ("lock acquire: "),
// without the root's name, which "ticketctl: " already gives.
func where(c *cobra.Command) string {
	if !c.HasParent() {
		return ""
	}
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ") + ": "
}

// isUsage reports whether err is a usage error.
func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

// flagError is a server's refusal of a value that a ticketctl flag gave:
// its text names the flag instead of the API field ("--ttl: invalid_argument:
// lease 50ms is outside the allowed range 100ms to 10m0s").
type flagError struct {
	flag string
	err  error // the SDK's error
	msg  string
}

// Error implements error.
func (e *flagError) Error() string { return e.flag + ": " + e.msg }

// Unwrap returns the SDK's error.
func (e *flagError) Unwrap() error { return e.err }

// ttlHint names --ttl in an answer refusing the lease (sdk.InvalidField
// "lease_ms"); other errors pass unchanged.
func ttlHint(err error) error {
	if sdk.InvalidField(err) != "lease_ms" {
		return err
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	return &flagError{flag: "--ttl", err: err, msg: ce.Error()}
}
