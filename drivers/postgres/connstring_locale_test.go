package postgres

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestRefusedParamHiddenTranslated: a server whose messages are
// translated (lc_messages) sends the severity "FATAL" translated, which
// pgx's own error handler does not recognise; the refusal of a password
// piece sent as a runtime parameter is still shown without the piece.
// The server here answers only the startup message, as PostgreSQL with
// lc_messages=ru_RU does (this machine has no such locale).
func TestRefusedParamHiddenTranslated(t *testing.T) {
	const piece = "S3cr3tPW"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			wg.Go(func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "ВАЖНО", SeverityUnlocalized: "FATAL", Code: "42704",
					Message: `нераспознанный параметр конфигурации: "` + piece + `"`})
				_ = be.Flush()
			})
		}
	})
	dsn := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres sslmode=disable password=Pw0 %s=x",
		ln.Addr().(*net.TCPAddr).Port, piece)
	d, err := New(Options{URL: dsn, Mode: ModeTable})
	if err != nil {
		t.Fatal(err)
	}
	defer closeDriver(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Minute})
	if err == nil || strings.Contains(err.Error(), piece) || !strings.Contains(err.Error(), "42704") {
		t.Fatalf("Acquire = %v; want the SQLSTATE 42704 without the parameter's name", err)
	}
}
