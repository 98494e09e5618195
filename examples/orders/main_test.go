package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/goleak"
	"go.uber.org/zap/zapcore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDemo(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]any
	}{
		{"memory", nil},
		{"file", map[string]any{"mutex.orders.driver": map[string]any{"type": "file", "dir": t.TempDir()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := loadConfig("", true)
			if err != nil {
				t.Fatal(err)
			}
			for key, v := range tt.set {
				if err := k.Set(key, v); err != nil {
					t.Fatal(err)
				}
			}
			app := fx.New(fx.NopLogger, appOptions(k, zapcore.ErrorLevel), fx.Invoke(runDemo))
			if err := app.Err(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := app.Start(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-app.Wait():
			case <-ctx.Done():
				t.Error("the demo did not finish")
			}
			if err := app.Stop(ctx); err != nil {
				t.Error(err)
			}
			if demoFailed.Load() {
				t.Fatal("the demo did not see what it expected")
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	k, err := loadConfig("", false)
	if err != nil {
		t.Fatal(err)
	}
	_ = k.Set("orders.adress", "x")
	if err := fx.New(fx.NopLogger, appOptions(k, zapcore.ErrorLevel)).Err(); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}
