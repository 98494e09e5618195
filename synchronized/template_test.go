package synchronized_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/mutexfx/mutexfx/synchronized"
)

func TestParseTemplate(t *testing.T) {
	values := map[string]string{"id": "42", "a.b": "x", "user": "u{1}"}
	tests := []struct {
		tmpl   string
		fields []string
		want   string
	}{
		{"order:{id}", []string{"id"}, "order:42"},
		{"{id}", []string{"id"}, "42"},
		{"plain", nil, "plain"},
		{"{id}-{ id }", []string{"id", "id"}, "42-42"},
		{"n:{a.b}:{user}", []string{"a.b", "user"}, "n:x:u{1}"},
		{"lit{{{id}}}", []string{"id"}, "lit{42}"},
		{"élan:{id}:✓", []string{"id"}, "élan:42:✓"},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			tp, err := synchronized.ParseTemplate(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if got := tp.Fields(); !slices.Equal(got, tt.fields) {
				t.Errorf("fields %q, want %q", got, tt.fields)
			}
			got, err := tp.Execute(func(f string) (string, bool) { v, ok := values[f]; return v, ok })
			if err != nil || got != tt.want {
				t.Errorf("Execute = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseTemplateMalformed(t *testing.T) {
	for _, tmpl := range []string{"", "order:{", "order:}", "order:{}", "order:{ }", "{a{b}}", "{a}}", "x{a.}", "x{.a}", "x{a..b}", "{id",
		"{a}{b}", "x{a}{b}y", "{a}%{b}", "{a}%25{b}"} {
		t.Run(tmpl, func(t *testing.T) {
			if _, err := synchronized.ParseTemplate(tmpl); !errors.Is(err, synchronized.ErrTemplate) {
				t.Fatalf("err = %v, want ErrTemplate", err)
			}
		})
	}
}

func TestTemplateMissingField(t *testing.T) {
	tp, err := synchronized.ParseTemplate("order:{id}:{line}")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]map[string]string{
		"absent": {"id": "1"},
		"empty":  {"id": "1", "line": ""},
	}
	for name, vals := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tp.Execute(func(f string) (string, bool) { v, ok := vals[f]; return v, ok })
			if !errors.Is(err, synchronized.ErrLockName) {
				t.Fatalf("err = %v, want ErrLockName", err)
			}
		})
	}
}
