import HTTPTypes
import OpenAPIRuntime

import struct Foundation.URL

/// Remembers that the server refused the last session token, so the next request asks the app for a new one.
/// While that refresh is under way, every other request waits for its token instead of taking the provider's
/// cached one, which the server has just refused: a request retried after a 401 then always carries a refreshed
/// token, even when another request (the events stream, a read) started the refresh.
actor TokenGate {
    private var refreshNext = false
    private var refreshing: Task<String, any Error>?

    func requestRefresh() { refreshNext = true }

    func token(from credentials: any StepLedgerCredentials) async throws -> String {
        do {
            return try await sessionToken(from: credentials)
        } catch {
            throw CredentialsUnavailable(underlying: String(describing: error))
        }
    }

    private func sessionToken(from credentials: any StepLedgerCredentials) async throws -> String {
        if let refreshing { return try await refreshing.value }
        guard refreshNext else { return try await credentials.sessionToken(refresh: false) }
        refreshNext = false
        let refresh = Task { try await credentials.sessionToken(refresh: true) }
        refreshing = refresh
        defer { refreshing = nil }
        do {
            return try await refresh.value
        } catch {
            refreshNext = true
            throw error
        }
    }
}

/// The app's credentials provider failed; the request was never sent.
struct CredentialsUnavailable: Error {
    let underlying: String
}

/// Puts the walker's session token on every request, asking the app for it each time.
struct SessionTokenMiddleware: ClientMiddleware {
    let gate: TokenGate
    let credentials: any StepLedgerCredentials
    /// The walker the store folder belongs to: a token of another walker is refused here, unsent.
    let owner: StoreOwner

    func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        let token = try await gate.token(from: credentials)
        try owner.admit(token)
        request.headerFields[.authorization] = "Bearer \(token)"
        return try await next(request, body, baseURL)
    }
}
