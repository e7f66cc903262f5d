package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/server/security"
)

// newAuthCmd builds "auth": helpers for the tokens file (--auth-tokens-file).
func newAuthCmd(stdout io.Writer, stdin io.Reader) *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Make bearer tokens and their tokens-file entries"}
	var principal string
	hash := &cobra.Command{
		Use:   "hash-token --principal NAME [TOKEN]",
		Short: "Print the tokens-file entry (SHA-256 digest) of TOKEN, read from stdin when not given; with --new, make a random token",
		Args:  cobra.MaximumNArgs(1),
	}
	var fresh bool
	hash.RunE = func(cmd *cobra.Command, args []string) error {
		if principal == "" {
			return fmt.Errorf("--principal is required")
		}
		var token string
		switch {
		case fresh:
			var b [24]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			token = hex.EncodeToString(b[:])
			fmt.Fprintf(stdout, "# token (give it to %s; it is not stored): %s\n", principal, token)
		case len(args) == 1:
			token = args[0]
		default:
			line, err := bufio.NewReader(stdin).ReadString('\n')
			if err != nil && err != io.EOF {
				return err
			}
			token = strings.TrimSpace(line)
		}
		if token == "" {
			return fmt.Errorf("empty token")
		}
		fmt.Fprintf(stdout, "  - principal: %s\n    sha256: %s\n", principal, security.TokenDigest(token))
		return nil
	}
	hash.Flags().StringVar(&principal, "principal", "", "principal the token authenticates as")
	hash.Flags().BoolVar(&fresh, "new", false, "make a random token and print it once")
	cmd.AddCommand(hash)
	return cmd
}
