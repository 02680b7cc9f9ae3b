package manifestapi

import "strings"

// target is what a request path under an API group's base names: the
// group's resource list (nothing set), its apply, a collection (every
// namespace when ns is ""), an object, or an object's subresource.
type target struct {
	apply         bool
	res           *Resource
	ns, name, sub string
}

// parseTarget splits path under base, checking the namespace and name and
// finding the resource by its plural with resource. Anything else is
// errNotFound, worded as Kubernetes words it.
func parseTarget(path, base string, resource func(plural string) (Resource, error)) (target, error) {
	notFound := fail(errNotFound, "the server could not find the requested resource %s", path)
	rest, ok := strings.CutPrefix(path, base)
	if !ok || (rest != "" && rest[0] != '/') {
		return target{}, notFound
	}
	rest = strings.Trim(rest, "/")
	var seg []string
	if rest != "" {
		seg = strings.Split(rest, "/")
	}
	switch {
	case len(seg) == 0:
		return target{}, nil
	case len(seg) == 1 && seg[0] == "apply":
		return target{apply: true}, nil
	case len(seg) == 1:
		res, err := resource(seg[0])
		return target{res: &res}, err
	case len(seg) >= 3 && len(seg) <= 5 && seg[0] == "namespaces":
	default:
		return target{}, notFound
	}
	t := target{ns: seg[1]}
	if err := checkLabel("namespace", t.ns); err != nil {
		return target{}, err
	}
	res, err := resource(seg[2])
	if err != nil {
		return target{}, err
	}
	t.res = &res
	if len(seg) == 3 {
		return t, nil
	}
	t.name = seg[3]
	if err := checkLabel("name", t.name); err != nil {
		return target{}, withObject(res.Kind, t.name, err)
	}
	if len(seg) == 5 {
		t.sub = seg[4]
	}
	return t, nil
}
