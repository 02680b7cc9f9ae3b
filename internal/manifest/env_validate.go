package manifest

import "github.com/capstan-dev/capstan/internal/procenv"

// validateWorkerEnv checks an InferenceEndpointConfig worker's
// environmentVariables. They reach the engine process, so names and values
// go through procenv, the deny-list the local runtime applies again at
// launch: a name that changes process loading or the engine's runtime
// (LD_PRELOAD, GODEBUG, PATH, …) is refused here with its field path rather
// than failing at launch. An entry with valueFrom is not set (capstan does
// not resolve it) but its name is still checked.
func validateWorkerEnv(l []EnvVar, p path, errs *ErrorList) {
	if len(l) > procenv.MaxVars {
		errs.add(p, "at most %d entries, got %d", procenv.MaxVars, len(l))
	}
	for i, e := range l {
		validateEnvVar(e.Name, e.Value, p.index(i), errs)
	}
}

// validateJSMEnv checks a JumpStartModel's environmentVariables, where the
// reference makes both name and value required.
func validateJSMEnv(l []NameValue, p path, errs *ErrorList) {
	if len(l) > procenv.MaxVars {
		errs.add(p, "at most %d entries, got %d", procenv.MaxVars, len(l))
	}
	for i, nv := range l {
		if nv.Value == "" {
			errs.add(p.index(i).child("value"), "required")
		}
		validateEnvVar(nv.Name, nv.Value, p.index(i), errs)
	}
}

func validateEnvVar(name, value string, p path, errs *ErrorList) {
	if name == "" {
		errs.add(p.child("name"), "required")
	} else if err := procenv.CheckName(name); err != nil {
		errs.add(p.child("name"), "%v", err)
	}
	if err := procenv.CheckValue(value); err != nil {
		errs.add(p.child("value"), "%v", err)
	}
}
