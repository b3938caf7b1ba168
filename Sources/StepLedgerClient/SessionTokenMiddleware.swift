import HTTPTypes
import OpenAPIRuntime

import struct Foundation.URL

/// Remembers that the server refused the last session token, so the next request asks the app for a new one.
actor TokenGate {
    private var refreshNext = false

    func requestRefresh() { refreshNext = true }

    func token(from credentials: any StepLedgerCredentials) async throws -> String {
        let refresh = refreshNext
        refreshNext = false
        do {
            return try await credentials.sessionToken(refresh: refresh)
        } catch {
            if refresh { refreshNext = true }
            throw CredentialsUnavailable(underlying: String(describing: error))
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

    func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(try await gate.token(from: credentials))"
        return try await next(request, body, baseURL)
    }
}
