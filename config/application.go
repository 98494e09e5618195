package config

// MaxApplicationLength is the longest application name, in bytes: what a
// lock's holder identity keeps of it (component.Options.Application).
const MaxApplicationLength = 32

// application reads a store's application name: 1 to 32 letters, digits,
// '.', '_' or '-', the characters a holder identity keeps (the component
// would replace others with '_' and cut the name: configured, it is
// refused instead, so that what list and inspect show is what was written).
func application(path string, v any) (string, error) {
	s, ok := v.(string)
	switch {
	case !ok:
		return "", Errorf(path, "must be a string")
	case s == "":
		return "", Errorf(path, "must not be empty (unset: the binary's name)")
	case len(s) > MaxApplicationLength:
		return "", Errorf(path, "must be at most %d bytes, got %d", MaxApplicationLength, len(s))
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return "", Errorf(path, "byte %d (%q) not allowed: only letters, digits, '.', '_' and '-'", i, c)
		}
	}
	return s, nil
}
