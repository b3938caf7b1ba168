import Foundation
import OpenAPIRuntime

extension StepLedgerClient {
    /// Submits a day's health totals with a device attestation, in one call: a nonce from the server, evidence
    /// from `attestor` bound to it, then `POST /health`.
    ///
    /// When the server refuses the evidence ("Attestation verification failed"), the attestor forgets its key and
    /// the whole exchange runs once more with a new nonce and a fresh attestation: a key restored from a backup
    /// onto another phone is refused that way.
    ///
    /// Submissions run one at a time: a second call waits for the first. Two assertions of one App Attest key in
    /// flight together would race for its counter, and the server refuses the one that loses (the client would
    /// then attest a new key for nothing).
    ///
    /// - Throws: ``StepLedgerError/attestationFailed`` when the second attestation is refused too;
    ///   ``StepLedgerError/invalidRequest(_:)`` with seed 002's message for implausible totals.
    public func submitHealth(_ totals: HealthTotals, attestor: some Attestor) async throws -> HealthRecord {
        while let running = healthTask {
            _ = try? await running.value
            if healthTask == running { healthTask = nil }
        }
        let task = Task { try await self.runSubmitHealth(totals, attestor: attestor) }
        healthTask = task
        defer { if healthTask == task { healthTask = nil } }
        // The caller's cancellation reaches the submission, as it would without the queue.
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    private func runSubmitHealth(_ totals: HealthTotals, attestor: some Attestor) async throws -> HealthRecord {
        // JSON has no NaN or infinity: such a total could not be sent, and is refused before a nonce and an
        // attestation are spent on it (each try would spend both, and the nonces count against the walker).
        for (field, value) in [
            ("duration", totals.duration), ("calories", totals.calories), ("distance", totals.distance),
        ]
        where !value.isFinite {
            throw StepLedgerError.invalidRequest("\(field) must be a finite number")
        }
        var resetOnce = false
        while true {
            let nonce = try await healthNonce()
            let evidence = try await attestor.attest(nonce: nonce)
            let body = Components.Schemas.HealthSubmission(
                nonce: nonce, attestationToken: evidence.token,
                platform: attestor.platform == .ios ? .ios : .android, steps: totals.steps,
                duration: totals.duration, calories: totals.calories, distance: totals.distance, source: totals.source,
                date: totals.date?.description, keyId: evidence.keyId)
            switch try await postHealth(body) {
            case .value(let record):
                return record
            case .attestationRefused:
                guard !resetOnce else { throw StepLedgerError.attestationFailed }
                resetOnce = true
                await attestor.reset()
            }
        }
    }

    private enum HealthAnswer: Sendable {
        case value(HealthRecord)
        case attestationRefused
    }

    private func healthNonce() async throws -> String {
        try await authorized {
            switch try await client.getHealthNonce(.init()) {
            case .ok(let ok):
                guard case .json(let body) = ok.body else {
                    return .failure(.unexpectedResponse(status: 200, code: nil))
                }
                return .value(body.nonce)
            case .unauthorized(let response): return .unauthorized(reason: Self.message(response.body))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
    }

    private func postHealth(_ body: Components.Schemas.HealthSubmission) async throws -> HealthAnswer {
        try await authorized {
            switch try await client.submitHealth(.init(body: .json(body))) {
            case .created(let created):
                guard case .json(let wire) = created.body, let date = CalendarDay(wire.date) else {
                    return .failure(.unexpectedResponse(status: 201, code: nil))
                }
                return .value(
                    .value(
                        HealthRecord(
                            id: wire.id, date: date, steps: wire.steps, duration: wire.duration,
                            calories: wire.calories, distance: wire.distance, source: wire.source)))
            case .badRequest(let response):
                guard case .json(let error) = response.body else { return .failure(.invalidRequest("")) }
                return .failure(.invalidRequest(error.message))
            case .unauthorized(let response):
                if Self.message(response.body) == "Attestation verification failed" {
                    return .value(.attestationRefused)
                }
                return .unauthorized(reason: Self.message(response.body))
            case .contentTooLarge: return .failure(.invalidRequest("the request is too large"))
            case .unsupportedMediaType: return .failure(.invalidRequest("unsupported media type"))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
    }

    private static func message(_ body: Components.Responses.HealthUnauthorized.Body) -> String? {
        guard case .json(let error) = body else { return nil }
        return error.message
    }
}
