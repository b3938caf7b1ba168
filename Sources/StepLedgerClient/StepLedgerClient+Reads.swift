import Foundation
import OpenAPIRuntime

extension StepLedgerClient {
    /// One answer of a read, before the client decides whether a 401 is worth a fresh token.
    enum Answer<Value: Sendable>: Sendable {
        case value(Value)
        case unauthorized(reason: String?)
        case failure(StepLedgerError)
    }

    /// Runs `attempt`, and once more with a freshly asked session token when the first answer is a 401.
    func authorized<Value: Sendable>(_ attempt: () async throws -> Answer<Value>) async throws -> Value {
        var refreshed = false
        while true {
            let answer: Answer<Value>
            do {
                answer = try await attempt()
            } catch {
                // A 401 the generated client could not read (a gateway's page) is a 401 all the same.
                guard case (401, _)? = Self.undecodedRefusal(error) else { throw Self.failure(error) }
                answer = .unauthorized(reason: nil)
            }
            switch answer {
            case .value(let value):
                return value
            case .failure(let error):
                throw error
            case .unauthorized(let reason):
                guard !refreshed else { throw StepLedgerError.unauthorized(reason: reason) }
                refreshed = true
                await tokens.requestRefresh()
            }
        }
    }

    /// The walker's lifetime steps, streak, Energy and open re-read requests (`GET /walker`).
    public func walker() async throws -> WalkerState {
        try await authorized {
            switch try await client.getWalker(.init()) {
            case .ok(let ok):
                guard case .json(let body) = ok.body else {
                    return .failure(.unexpectedResponse(status: 200, code: nil))
                }
                return .value(WalkerState(body))
            case .unauthorized(let response): return .unauthorized(reason: Self.reason(response.body))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
    }

    /// The server's state of each day in `from...to` (at most 92 days) that has steps, and the local queue's
    /// days refreshed with it.
    public func days(from: CalendarDay, to: CalendarDay) async throws -> [DayState] {
        guard from <= to, to.days(since: from) <= 91 else {
            throw StepLedgerError.invalidRequest("from must not be after to, and the range at most 92 days")
        }
        let asked = answersNoted
        let days: [DayState] = try await authorized {
            switch try await client.listStepDays(.init(query: .init(from: from.description, to: to.description))) {
            case .ok(let ok):
                guard case .json(let body) = ok.body else {
                    return .failure(.unexpectedResponse(status: 200, code: nil))
                }
                return .value(body.days.compactMap(DayState.init))
            case .badRequest(let response):
                guard case .json(let error) = response.body else { return .failure(.invalidRequest("")) }
                return .failure(.invalidRequest(error.message))
            case .unauthorized(let response): return .unauthorized(reason: Self.reason(response.body))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
        // A flush may have had an answer about a day while this read was on its way: that answer is newer.
        for day in days where dayAnsweredAt[day.day, default: 0] <= asked {
            state.noteServer(day)
            if !state.buckets.contains(where: { $0.day == day.day }) { state.record(day) }
        }
        try save()
        return days
    }

    /// The walker's allocations, newest first (the server's newest 100); those made on credit still being checked
    /// are ``Allocation/Status-swift.enum/provisional``. The read also brings ``provisionalAllocations()`` up to
    /// date: one it shows confirmed or refunded is no longer pending validation, and one it shows provisional is
    /// (made on another device, or kept by the server after a partial refund). A badged allocation older than
    /// those 100 is looked up among the server's provisional ones, and settled when it is no longer there.
    public func allocations() async throws -> [Allocation] {
        let asked = badgesNoted
        let allocations = try await readAllocations(status: nil)
        // What the reads show of each allocation: its badge, or `.some(nil)` for none. Applied at the end to the
        // badges as they are then, not to a copy taken before a read: an event or a spend may change a badge while
        // either read is on its way, and what it did is newer than what the read shows.
        var shownBadges: [String: Allocation?] = [:]
        for allocation in allocations {
            shownBadges.updateValue(allocation.status == .provisional ? allocation : nil, forKey: allocation.id)
        }
        let shown = Set(allocations.map(\.id))
        if state.provisionalAllocations.keys.contains(where: { !shown.contains($0) }) {
            let provisional = try await readAllocations(status: .provisional)
            let waiting = Set(provisional.map(\.id))
            // Only what the list shows provisional: a server before `?status=` lists every status.
            for allocation in provisional where allocation.status == .provisional {
                shownBadges.updateValue(allocation, forKey: allocation.id)
            }
            // A full page may leave older provisional allocations out: only a shorter one says what is settled.
            if provisional.count < Self.allocationPage {
                for id in state.provisionalAllocations.keys where !shown.contains(id) && !waiting.contains(id) {
                    shownBadges.updateValue(nil, forKey: id)
                }
            }
        }
        var pending = state.provisionalAllocations
        for (id, badge) in shownBadges where badgeChangedAt[id, default: 0] <= asked {
            pending[id] = badge
        }
        if pending != state.provisionalAllocations {
            state.provisionalAllocations = pending
            try save()
        }
        return allocations
    }

    /// Notes that an event or a spend changed the badge of `allocationId` (see `badgesNoted`).
    func noteBadge(_ allocationId: String) {
        badgesNoted += 1
        badgeChangedAt[allocationId] = badgesNoted
    }

    /// How many allocations the server lists at most.
    static let allocationPage = 100

    private func readAllocations(status: Operations.ListAllocations.Input.Query.StatusPayload?) async throws
        -> [Allocation]
    {
        try await authorized {
            switch try await client.listAllocations(.init(query: .init(status: status))) {
            case .ok(let ok):
                guard case .json(let body) = ok.body else {
                    return .failure(.unexpectedResponse(status: 200, code: nil))
                }
                return .value(body.items.compactMap(Allocation.init))
            case .badRequest(let response):
                guard case .json(let error) = response.body else { return .failure(.invalidRequest("")) }
                return .failure(.invalidRequest(error.message))
            case .unauthorized(let response): return .unauthorized(reason: Self.reason(response.body))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
    }

    /// Spends `points` of Energy on a node, under one idempotency key for every try (up to `attempts`): a try
    /// that met a 5xx or no network is sent again with the same key and body, so the walker is charged once.
    /// The key is minted here unless `idempotencyKey` gives one: an app that keeps the key of a spend it has not
    /// seen answered (the app was killed, every try failed) and calls again with it is charged once too.
    ///
    /// An allocation paid from credit still being checked comes back ``Allocation/Status-swift.enum/provisional``
    /// with the days it depends on; the client keeps it until an `allocation-reverted` event or a later read
    /// settles it (``provisionalAllocations()``). Called again with the key of a spend the server made, it answers
    /// that spend as it was stored; the allocation may have been settled or refunded since, so the client then
    /// reads the allocations (``allocations()``), which settles its badge, and returns the allocation as that read
    /// shows it; the stored answer when the read fails (badged while provisional, until the next read) or does
    /// not show it (older than the newest 100).
    /// - Throws: ``StepLedgerError/insufficientEnergy(required:spendable:)``,
    ///   ``StepLedgerError/invalidRequest(_:)`` for a bad node id, number of points or key (one this client minted
    ///   more than 7 days before: the server keeps a key 8 days, and would take the call as a new spend),
    ///   ``StepLedgerError/allocationUnanswered(idempotencyKey:lastError:)`` with the key to call again with when
    ///   no try was answered, and the errors of a read.
    public func allocate(
        kind: Allocation.Kind, nodeId: String, points: Int, attempts: Int = 3, idempotencyKey: String? = nil
    ) async throws -> Allocation {
        guard (1...128).contains(nodeId.utf8.count) else {
            throw StepLedgerError.invalidRequest("nodeId must be 1 to 128 bytes")
        }
        guard (1...1_000_000_000).contains(points) else {
            throw StepLedgerError.invalidRequest("points must be 1 to 1000000000")
        }
        if let idempotencyKey {
            try IdempotencyKey.check(idempotencyKey)
            // The server keeps a key 8 days; past that it would take the call as a new spend and charge again.
            if let minted = IdempotencyKey.mintedAt(idempotencyKey),
                now().timeIntervalSince(minted) > Self.allocationKeyLifetime
            {
                throw StepLedgerError.invalidRequest(
                    "idempotencyKey was minted more than 7 days ago: the server may no longer hold it and would spend "
                        + "again; read allocations() to see whether that spend was made")
            }
        }
        let body = Components.Schemas.AllocationRequest(
            kind: kind == .tree ? .tree : .keystone, nodeId: nodeId, points: points,
            idempotencyKey: idempotencyKey ?? IdempotencyKey.mint(at: now(), using: &random))
        let (allocation, replayed) = try await underOneKey(
            body.idempotencyKey, attempts: attempts, unanswered: StepLedgerError.allocationUnanswered
        ) {
            try await createAllocation(body)
        }
        if replayed {
            // The answer as stored, not the spend as it is now: an `allocation-reverted` event that came while no
            // answer had been seen found no badge to clear. So a provisional answer is badged as the read found it
            // (not as a change of its own), and the read that follows settles it when it is settled, even past the
            // newest 100; when that read fails, the badge stays until the next one.
            if allocation.status == .provisional, state.provisionalAllocations[allocation.id] == nil {
                state.provisionalAllocations[allocation.id] = allocation
                try save()
            }
            return (try? await allocations().first { $0.id == allocation.id }) ?? allocation
        }
        if allocation.status == .provisional {
            state.provisionalAllocations[allocation.id] = allocation
            noteBadge(allocation.id)
            try save()
        }
        return allocation
    }

    /// How long after it was minted (by the device's clock, then and now) an allocation's key may be sent again: a day
    /// less than the 8 days the server keeps it, for the clocks' difference.
    static let allocationKeyLifetime: TimeInterval = 7 * 86_400

    /// Runs `send` up to `attempts` times for a request under one idempotency key `key`: a try that met a 5xx, a
    /// 409 `IDEMPOTENCY_IN_FLIGHT` or no network is sent again after the retry policy's wait, or after a 503's
    /// `Retry-After` when that is longer; a `Retry-After` beyond `longestWaitInCall` ends the tries (a call does not
    /// wait that long, and a try sooner would be refused again). Once a try went
    /// unanswered the server may have acted on it, so from then on every way out short of an answer about the key
    /// (the tries used up, a later 429 or 401, a cancellation) throws `unanswered(key, last error)`: calling again
    /// with that key cannot act twice. An answer about the key is thrown as it is.
    /// The longest `underOneKey` waits between two tries.
    static let longestWaitInCall: TimeInterval = 30

    func underOneKey<Value: Sendable>(
        _ key: String, attempts: Int, unanswered wrap: (String, StepLedgerError) -> StepLedgerError,
        send: () async throws -> Value
    ) async throws -> Value {
        var failures = 0
        var unanswered: StepLedgerError?
        func ending(_ error: StepLedgerError) -> StepLedgerError {
            guard unanswered != nil else { return error }
            return wrap(key, error)
        }
        while true {
            do {
                return try await send()
            } catch let error as StepLedgerError {
                failures += 1
                switch error {
                case .transport, .serverUnavailable, .unexpectedResponse(status: 409, _),
                    .unexpectedResponse(500..., _):
                    unanswered = error
                    guard failures < max(1, attempts) else { throw ending(error) }
                    var wait = configuration.retry.delay(
                        afterFailures: failures, random: Double.random(in: 0...1, using: &random))
                    if case .serverUnavailable(let retryAfter?) = error {
                        guard retryAfter <= Self.longestWaitInCall else { throw ending(error) }
                        wait = max(wait, retryAfter)
                    }
                    do {
                        try await Task.sleep(nanoseconds: UInt64(min(wait, Self.longestWaitInCall) * 1_000_000_000))
                    } catch {
                        throw ending(.transport("cancelled while waiting to try again"))
                    }
                case .insufficientEnergy, .invalidRequest, .idempotencyKeyReused, .rereadRefused:
                    // An answer about this key: the earlier try was not stored (or this is its stored answer).
                    throw error
                default:
                    throw ending(error)
                }
            } catch {
                // Not the client's own error (a cancellation inside the request): after an unanswered try, as
                // unanswered as a lost one; before, thrown as it is.
                guard unanswered != nil else { throw error }
                throw ending(.transport(String(describing: type(of: error))))
            }
        }
    }

    /// Allocations made on provisional credit that the client has not yet seen settled: badge them as
    /// "pending validation".
    public func provisionalAllocations() -> [Allocation] {
        state.provisionalAllocations.values.sorted { $0.createdAt > $1.createdAt }
    }

    /// The allocation a `POST /walker/allocations` answered, and whether the answer was the stored one replayed.
    private func createAllocation(_ body: Components.Schemas.AllocationRequest) async throws -> (
        allocation: Allocation, replayed: Bool
    ) {
        try await authorized {
            switch try await client.createAllocation(.init(body: .json(body))) {
            case .created(let created):
                guard case .json(let wire) = created.body, let allocation = Allocation(wire) else {
                    return .failure(.unexpectedResponse(status: 201, code: nil))
                }
                return .value((allocation, created.headers.idempotentReplayed == "true"))
            case .badRequest(let response):
                guard case .json(let error) = response.body else { return .failure(.invalidRequest("")) }
                return .failure(.invalidRequest(error.message))
            case .unauthorized(let response): return .unauthorized(reason: Self.reason(response.body))
            case .contentTooLarge: return .failure(.invalidRequest("the request is too large"))
            case .unsupportedMediaType: return .failure(.invalidRequest("unsupported media type"))
            case .unprocessableContent(let response):
                guard case .json(let error) = response.body else {
                    return .failure(.unexpectedResponse(status: 422, code: nil))
                }
                if error.error == "IDEMPOTENCY_KEY_REUSED" { return .failure(.idempotencyKeyReused) }
                return .failure(
                    .insufficientEnergy(
                        required: error.details.int("required") ?? 0, spendable: error.details.int("spendable") ?? 0))
            case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
            case .serviceUnavailable(let response):
                return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
            case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
            case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
            }
        }
    }

    static func reason(_ body: Components.Responses.Unauthorized.Body) -> String? {
        guard case .json(let error) = body else { return nil }
        return error.details.string("reason")
    }

    /// What a 429 without a `Retry-After` asks the app to wait, in seconds: the server's limits count by the minute.
    static let unannouncedRateLimitWait: TimeInterval = 60

    static func rateLimited(_ retryAfter: Int?) -> StepLedgerError {
        .rateLimited(retryAfter: retryAfter.map(TimeInterval.init) ?? unannouncedRateLimitWait)
    }
}

extension WalkerState {
    init(_ wire: Components.Schemas.WalkerResponse) {
        self.init(
            walkerId: wire.walkerId, totalLifetimeSteps: wire.totalLifetimeSteps,
            currentRegionId: wire.currentRegionId,
            streak: Streak(
                currentLengthDays: wire.streakState.currentLengthDays ?? 0,
                lastAttestedDate: wire.streakState.lastAttestedDate.flatMap(CalendarDay.init),
                bonusTier: wire.streakState.bonusTier?.rawValue ?? "T0_NONE",
                decayAt: wire.streakState.decayAt.flatMap(CalendarDay.init)),
            energy: Energy(
                confirmed: wire.energy.confirmed, pending: wire.energy.pending, spendable: wire.energy.spendable),
            rereadRequests: wire.rereadRequests.compactMap(RereadRequest.init))
    }
}

extension WalkerState.RereadRequest {
    init?(_ wire: Components.Schemas.RereadRequestEntry) {
        guard let day = CalendarDay(wire.day) else { return nil }
        self.init(
            id: wire.id, day: day, windowStart: wire.window.startUtc, windowEnd: wire.window.endUtc, nonce: wire.nonce,
            deadline: wire.deadline)
    }
}

extension DayState {
    init?(_ wire: Components.Schemas.StepDaysResponse.DaysPayloadPayload) {
        guard let day = CalendarDay(wire.day) else { return nil }
        let status: Status =
            switch wire.reconciliationStatus {
            case .pending: .pending
            case .accepted: .accepted
            case .quarantined: .quarantined
            case .rejected: .rejected
            }
        self.init(
            day: day, status: status, reportedCount: wire.reportedCount, acceptedCount: wire.acceptedCount,
            energyCredited: wire.energyCredited)
    }
}

extension Allocation {
    init?(_ wire: Components.Schemas.Allocation) {
        let status: Status =
            switch wire.status {
            case .provisional: .provisional
            case .confirmed: .confirmed
            case .refunded: .refunded
            }
        self.init(
            id: wire.id, kind: wire.kind == .tree ? .tree : .keystone, nodeId: wire.nodeId, points: wire.points,
            refundedPoints: wire.refundedPoints, status: status,
            dependsOn: wire.dependsOn.compactMap(CalendarDay.init), createdAt: wire.createdAt)
    }
}
