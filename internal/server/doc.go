// Package server assembles `capstan serve`: the store, fleet, endpoint service
// and controller, the gateway, the SageMaker control and runtime APIs (behind
// SigV4 when credentials are configured), /metrics, /healthz and the dev-clock
// admin call, on one listener. It owns startup order and graceful shutdown
// (stop accepting, stop the controller, stop every replica, close the store);
// it owns no business logic.
package server
