import StepDatabase

extension Store {
    /// Runs `body` with this store, then closes its database whether `body` returned or threw. After a failure,
    /// an error from closing is dropped: the caller needs the failure.
    package func closing<Result>(after body: (Store) async throws -> Result) async throws -> Result {
        let result: Result
        do {
            result = try await body(self)
        } catch {
            try? await close()
            throw error
        }
        try await close()
        return result
    }
}
