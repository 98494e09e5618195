package testutil

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Printed renders each value of values in every way an application may
// print or log it (fmt verbs, encoding/json, zap's JSON encoder with Any
// and Reflect), keyed by the value's name and the way: "name %v", "name
// json", "name zap.Any", … A value that does not marshal gives the error.
func Printed(values map[string]any) map[string]string {
	out := map[string]string{}
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			out[name+" "+verb] = fmt.Sprintf(verb, v)
		}
		if j, err := json.Marshal(v); err != nil {
			out[name+" json"] = "json.Marshal: " + err.Error()
		} else {
			out[name+" json"] = string(j)
		}
		for how, f := range map[string]zap.Field{"zap.Any": zap.Any("v", v), "zap.Reflect": zap.Reflect("v", v)} {
			var buf bytes.Buffer
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zap.DebugLevel)
			zap.New(core).Info("printed", f)
			out[name+" "+how] = buf.String()
		}
	}
	return out
}
