import Foundation
import StepCore
import StepSettings
import StepStore

/// The body of `POST /health` (seed 002), checked for form before anything is read or written. Amounts stay
/// as sent until the plausibility check has bounded them; only then do they become thousandths.
struct HealthSubmission: Sendable {
    static let maxNonceLength = 512
    static let maxSourceLength = 64
    static let maxKeyIdLength = 128

    var nonce: String
    var attestationToken: String
    /// As sent: "Unsupported platform" is decided after the nonce checks, in seed 002's order.
    var platform: String
    var steps: Double
    var duration: Double
    var calories: Double
    var distance: Double
    var source: String
    var date: LocalDate?
    var keyId: String?

    /// Reads the body; the first problem, in field order, is the 400's message.
    static func decode(_ bytes: some Collection<UInt8>) throws(HealthAPIError) -> HealthSubmission {
        guard case .object(let fields)? = JSONReader.read(bytes) else {
            throw .badRequest("Request body must be a JSON object")
        }
        let nonce = try text(fields, "nonce", label: "Nonce", maxLength: Int.max)
        // No nonce is that long (they are issued at 43 characters): seed 002's answer for a nonce that does not exist.
        guard nonce.unicodeScalars.count <= maxNonceLength else { throw .badRequest("Invalid nonce") }
        let token = try text(fields, "attestationToken", label: "Attestation token", maxLength: Int.max)
        // Any other value, however long, is seed 002's "Unsupported platform", decided after the nonce's checks.
        let platform = try text(fields, "platform", label: "Platform", maxLength: Int.max)
        let steps = try amount(fields, "steps", label: "Steps")
        // The reader tells a whole number from its digits and reads it as an integer: a double within Int's range is
        // not one, though it may round to one (`8500.0000000000001`). One past it is whole (and implausibly high).
        if case .double(let number)? = fields["steps"], number.magnitude < 0x1p63 {
            throw .badRequest("Steps must be a whole number")
        }
        let duration = try amount(fields, "duration", label: "Duration")
        let calories = try amount(fields, "calories", label: "Calories")
        let distance = try amount(fields, "distance", label: "Distance")
        let source = try text(fields, "source", label: "Source", maxLength: maxSourceLength)
        var date: LocalDate?
        switch fields["date"] {
        case nil, .null?: break
        case .string(let value)?:
            guard let parsed = LocalDate(iso: value) else {
                throw .badRequest("Date must be a valid date in YYYY-MM-DD format")
            }
            date = parsed
        default: throw .badRequest("Date must be a valid date in YYYY-MM-DD format")
        }
        var keyId: String?
        switch fields["keyId"] {
        case nil, .null?: break
        case .string(let value)? where !value.isEmpty && value.unicodeScalars.count <= maxKeyIdLength: keyId = value
        default: throw .badRequest("keyId must be the base64 App Attest key id")
        }
        return HealthSubmission(
            nonce: nonce, attestationToken: token, platform: platform, steps: steps, duration: duration,
            calories: calories, distance: distance, source: source, date: date, keyId: keyId)
    }

    /// Seed 002's plausibility messages, in its order; nil when every amount is within the limits.
    func implausibility(_ limits: HealthLimits) -> (code: String, message: String)? {
        if steps > Double(limits.maxSteps) { return ("HEALTH_STEPS_IMPLAUSIBLE", "Step count is implausibly high") }
        if calories > limits.maxCalories { return ("HEALTH_CALORIES_IMPLAUSIBLE", "Calorie count is implausibly high") }
        if distance > limits.maxDistanceMeters {
            return ("HEALTH_DISTANCE_IMPLAUSIBLE", "Distance is implausibly high")
        }
        if duration > limits.maxDurationSeconds {
            return ("HEALTH_DURATION_IMPLAUSIBLE", "Duration is implausibly high")
        }
        return nil
    }

    /// The amounts as stored; call after `implausibility` has bounded them (so none overflows).
    var totals: HealthTotals {
        HealthTotals(
            steps: Int(steps), durationMilli: Self.milli(duration), caloriesMilli: Self.milli(calories),
            distanceMilli: Self.milli(distance))
    }

    /// Whole thousandths, rounded half away from zero.
    private static func milli(_ value: Double) -> Int {
        Int((value * 1000).rounded())
    }

    private static func text(
        _ fields: [String: JSONValue], _ name: String, label: String, maxLength: Int
    ) throws(HealthAPIError) -> String {
        switch fields[name] {
        case nil, .null?: throw .badRequest("\(label) is required")
        case .string(let value)?:
            guard !value.isEmpty else { throw .badRequest("\(label) is required") }
            // Unicode scalars, as JSON Schema's maxLength counts them (the document states these bounds).
            guard value.unicodeScalars.count <= maxLength else {
                throw .badRequest("\(label) must be at most \(maxLength) characters")
            }
            return value
        default: throw .badRequest("\(label) must be a string")
        }
    }

    /// A finite, non-negative number. Zero counts as positive here: a day without a walk is still a day.
    private static func amount(_ fields: [String: JSONValue], _ name: String, label: String) throws(HealthAPIError)
        -> Double
    {
        let value: Double
        switch fields[name] {
        case nil, .null?: throw .badRequest("\(label) is required")
        case .int(let number)?: value = Double(number)
        case .double(let number)?: value = number
        default: throw .badRequest("\(label) must be a positive number")
        }
        guard value.isFinite, value >= 0 else { throw .badRequest("\(label) must be a positive number") }
        return value
    }
}
