// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

interface IERC20Minimal {
    function transfer(address to, uint256 value) external returns (bool);
    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

/// @title BountyBoard: the reference bounty contract of the bounty read service.
/// @notice Posters fund bounties in USDC, claimants submit work against a bond, whitelisted
/// grouts dispute submissions during their review window, and the arbiter resolves disputes.
/// Every payout is credited to an internal balance and paid out by withdraw/withdrawTo.
/// @dev Every state change emits an event that carries everything an off-chain mirror needs,
/// so an indexer can rebuild all records from logs alone. A deadline is the last second at
/// which the action it guards is still allowed: submit until `deadline`, dispute until
/// `reviewDeadline`; refundExpired and finalize from the second after.
contract BountyBoard {
    enum BountyStatus { Open, Resolved, Refunded }
    enum SubmissionStatus { Submitted, Disputed, Accepted, Rejected, Refunded }
    enum DisputeStatus { PendingHumanReview, Upheld, Rejected, Cancelled }

    struct Bounty {
        address poster;
        BountyStatus status;
        uint64 duration;
        uint64 deadline;
        uint64 challengeWindow;
        uint256 rewardAmount;
        uint256 feeAmount;
        uint256 bondAmount;
        uint256 reviewCursor;
        uint256 liveSubmissions;
        bytes32 metadataHash;
        string metadataUri;
    }

    struct Submission {
        uint256 bountyId;
        address claimant;
        SubmissionStatus status;
        uint64 reviewDeadline;
        uint32 pendingDisputes;
        uint256 bondAmount;
        bytes32 metadataHash;
        string metadataUri;
    }

    struct Dispute {
        uint256 submissionId;
        address challenger;
        DisputeStatus status;
        uint256 bondAmount;
        bytes32 metadataHash;
        string metadataUri;
    }

    uint256 public constant BPS_DENOMINATOR = 10_000;
    uint64 public constant MAX_REVIEW_WINDOW = 365 days;

    IERC20Minimal public immutable usdc;
    address public owner;
    address public arbiter;
    address public feeRecipient;

    uint16 public postFeeBps = 250;
    uint16 public submissionBondBps = 1_000;
    uint256 public disputeBond = 5_000_000;
    uint64 public reviewWindow = 1 days;

    uint256 public bountyCount;
    uint256 public submissionCount;
    uint256 public disputeCount;

    mapping(address => bool) public isGrout;
    mapping(address => uint256) public credits;

    mapping(uint256 => Bounty) private _bounties;
    mapping(uint256 => Submission) private _submissions;
    mapping(uint256 => Dispute) private _disputes;
    mapping(uint256 => uint256[]) private _queues;

    event BountyCreated(
        uint256 indexed bountyId,
        address indexed poster,
        uint256 rewardAmount,
        uint256 feeAmount,
        uint256 bondAmount,
        uint64 duration,
        uint64 deadline,
        uint64 challengeWindow,
        string metadataUri,
        bytes32 metadataHash
    );
    event SubmissionCreated(
        uint256 indexed submissionId,
        uint256 indexed bountyId,
        address indexed claimant,
        uint256 bondAmount,
        uint64 reviewDeadline,
        string metadataUri,
        bytes32 metadataHash
    );
    event DisputeCreated(
        uint256 indexed disputeId,
        uint256 indexed submissionId,
        address indexed challenger,
        uint256 bountyId,
        uint256 bondAmount,
        string metadataUri,
        bytes32 metadataHash
    );
    /// @dev submissionStatus is the disputed submission's status after the resolution.
    event DisputeResolved(
        uint256 indexed disputeId,
        uint256 indexed submissionId,
        bool upheld,
        SubmissionStatus submissionStatus
    );
    event DisputeCancelled(uint256 indexed disputeId, uint256 indexed submissionId);
    event BountyFinalized(
        uint256 indexed bountyId, uint256 indexed submissionId, address indexed claimant, uint256 payout
    );
    event BountyRefunded(uint256 indexed bountyId, address indexed poster, uint256 amount);
    event SubmissionRefunded(
        uint256 indexed submissionId, uint256 indexed bountyId, address indexed claimant, uint256 amount
    );
    event ReviewCursorAdvanced(uint256 indexed bountyId, uint256 cursor);
    event Credited(address indexed account, uint256 amount, uint256 balance);
    event Withdrawn(address indexed account, address indexed recipient, uint256 amount);
    event GroutSet(address indexed grout, bool whitelisted);
    event ParametersSet(uint16 postFeeBps, uint16 submissionBondBps, uint256 disputeBond, uint64 reviewWindow);
    event ArbiterSet(address indexed arbiter);
    event FeeRecipientSet(address indexed feeRecipient);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    error NotOwner();
    error NotArbiter();
    error NotGrout();
    error ZeroAddress();
    error ZeroAmount();
    error InvalidDuration();
    error InvalidParameters();
    error UnknownBounty(uint256 bountyId);
    error UnknownSubmission(uint256 submissionId);
    error UnknownDispute(uint256 disputeId);
    error BountyNotOpen(uint256 bountyId);
    error BountyStillOpen(uint256 bountyId);
    error BountyDeadlinePassed(uint256 bountyId);
    error BountyDeadlineNotReached(uint256 bountyId);
    error ReviewWindowClosed(uint256 submissionId);
    error ReviewWindowOpen(uint256 submissionId);
    error WrongSubmissionStatus(uint256 submissionId, SubmissionStatus status);
    error WrongDisputeStatus(uint256 disputeId, DisputeStatus status);
    error NoSubmissionAtCursor(uint256 bountyId);
    error CursorCannotMove(uint256 bountyId);
    error SubmissionsPending(uint256 bountyId);
    error NothingToWithdraw();
    error TokenTransferFailed();

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner();
        _;
    }

    constructor(address usdc_) {
        if (usdc_ == address(0)) revert ZeroAddress();
        usdc = IERC20Minimal(usdc_);
        owner = msg.sender;
        arbiter = msg.sender;
        feeRecipient = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
        emit ArbiterSet(msg.sender);
        emit FeeRecipientSet(msg.sender);
        emit ParametersSet(postFeeBps, submissionBondBps, disputeBond, reviewWindow);
    }

    // ---------------------------------------------------------------- posters and claimants

    /// @notice Posts a bounty. Pulls reward plus post fee from the caller (approve first).
    function createBounty(string calldata metadataUri, bytes32 metadataHash, uint256 rewardAmount, uint64 duration)
        external
        returns (uint256 bountyId)
    {
        if (rewardAmount == 0) revert ZeroAmount();
        // The deadline, and the review deadline of a submission made at it, must fit in uint64.
        if (duration == 0 || uint256(block.timestamp) + duration + reviewWindow > type(uint64).max) {
            revert InvalidDuration();
        }
        (uint256 fee, uint256 bond) = _quote(rewardAmount);
        bountyId = ++bountyCount;
        Bounty storage b = _bounties[bountyId];
        b.poster = msg.sender;
        b.status = BountyStatus.Open;
        b.duration = duration;
        b.deadline = uint64(block.timestamp) + duration;
        b.challengeWindow = reviewWindow;
        b.rewardAmount = rewardAmount;
        b.feeAmount = fee;
        b.bondAmount = bond;
        b.metadataHash = metadataHash;
        b.metadataUri = metadataUri;
        emit BountyCreated(
            bountyId, msg.sender, rewardAmount, fee, bond, duration, b.deadline, b.challengeWindow, metadataUri, metadataHash
        );
        _pull(msg.sender, rewardAmount + fee);
        if (fee > 0) _credit(feeRecipient, fee);
    }

    /// @notice Submits work to an open bounty before its deadline. Pulls the bounty's bond.
    function submit(uint256 bountyId, string calldata metadataUri, bytes32 metadataHash)
        external
        returns (uint256 submissionId)
    {
        Bounty storage b = _bounty(bountyId);
        if (b.status != BountyStatus.Open) revert BountyNotOpen(bountyId);
        if (block.timestamp > b.deadline) revert BountyDeadlinePassed(bountyId);
        submissionId = ++submissionCount;
        Submission storage s = _submissions[submissionId];
        s.bountyId = bountyId;
        s.claimant = msg.sender;
        s.status = SubmissionStatus.Submitted;
        s.reviewDeadline = uint64(block.timestamp) + b.challengeWindow;
        s.bondAmount = b.bondAmount;
        s.metadataHash = metadataHash;
        s.metadataUri = metadataUri;
        _queues[bountyId].push(submissionId);
        b.liveSubmissions += 1;
        emit SubmissionCreated(
            submissionId, bountyId, msg.sender, s.bondAmount, s.reviewDeadline, metadataUri, metadataHash
        );
        _pull(msg.sender, s.bondAmount);
    }

    /// @notice A whitelisted grout disputes a submission within its review window. Pulls the dispute bond.
    function dispute(uint256 submissionId, string calldata metadataUri, bytes32 metadataHash)
        external
        returns (uint256 disputeId)
    {
        if (!isGrout[msg.sender]) revert NotGrout();
        Submission storage s = _submission(submissionId);
        if (s.status != SubmissionStatus.Submitted && s.status != SubmissionStatus.Disputed) {
            revert WrongSubmissionStatus(submissionId, s.status);
        }
        if (_bounties[s.bountyId].status != BountyStatus.Open) revert BountyNotOpen(s.bountyId);
        if (block.timestamp > s.reviewDeadline) revert ReviewWindowClosed(submissionId);
        disputeId = ++disputeCount;
        Dispute storage d = _disputes[disputeId];
        d.submissionId = submissionId;
        d.challenger = msg.sender;
        d.status = DisputeStatus.PendingHumanReview;
        d.bondAmount = disputeBond;
        d.metadataHash = metadataHash;
        d.metadataUri = metadataUri;
        s.status = SubmissionStatus.Disputed;
        s.pendingDisputes += 1;
        emit DisputeCreated(disputeId, submissionId, msg.sender, s.bountyId, d.bondAmount, metadataUri, metadataHash);
        _pull(msg.sender, d.bondAmount);
    }

    /// @notice The arbiter's decision on a pending dispute whose submission is disputed.
    function resolveDispute(uint256 disputeId, bool upheld) external {
        if (msg.sender != arbiter) revert NotArbiter();
        Dispute storage d = _dispute(disputeId);
        if (d.status != DisputeStatus.PendingHumanReview) revert WrongDisputeStatus(disputeId, d.status);
        Submission storage s = _submissions[d.submissionId];
        if (s.status != SubmissionStatus.Disputed) revert WrongSubmissionStatus(d.submissionId, s.status);
        s.pendingDisputes -= 1;
        if (upheld) {
            d.status = DisputeStatus.Upheld;
            s.status = SubmissionStatus.Rejected;
            _bounties[s.bountyId].liveSubmissions -= 1;
            emit DisputeResolved(disputeId, d.submissionId, true, s.status);
            _credit(d.challenger, s.bondAmount + d.bondAmount);
        } else {
            d.status = DisputeStatus.Rejected;
            if (s.pendingDisputes == 0) s.status = SubmissionStatus.Submitted;
            emit DisputeResolved(disputeId, d.submissionId, false, s.status);
            _credit(s.claimant, d.bondAmount);
        }
    }

    /// @notice Cancels a pending dispute whose submission was already rejected through another dispute.
    function cancelResolvedDispute(uint256 disputeId) external {
        Dispute storage d = _dispute(disputeId);
        if (d.status != DisputeStatus.PendingHumanReview) revert WrongDisputeStatus(disputeId, d.status);
        Submission storage s = _submissions[d.submissionId];
        if (s.status != SubmissionStatus.Rejected) revert WrongSubmissionStatus(d.submissionId, s.status);
        d.status = DisputeStatus.Cancelled;
        s.pendingDisputes -= 1;
        emit DisputeCancelled(disputeId, d.submissionId);
        _credit(d.challenger, d.bondAmount);
    }

    /// @notice Moves the bounty's review cursor past rejected submissions.
    function advanceReviewCursor(uint256 bountyId) external {
        Bounty storage b = _bounty(bountyId);
        uint256[] storage queue = _queues[bountyId];
        uint256 cursor = b.reviewCursor;
        while (cursor < queue.length && _submissions[queue[cursor]].status == SubmissionStatus.Rejected) {
            cursor += 1;
        }
        if (cursor == b.reviewCursor) revert CursorCannotMove(bountyId);
        b.reviewCursor = cursor;
        emit ReviewCursorAdvanced(bountyId, cursor);
    }

    /// @notice Accepts the submission at the review cursor once its review window has passed.
    function finalize(uint256 bountyId) external {
        Bounty storage b = _bounty(bountyId);
        if (b.status != BountyStatus.Open) revert BountyNotOpen(bountyId);
        uint256[] storage queue = _queues[bountyId];
        if (b.reviewCursor >= queue.length) revert NoSubmissionAtCursor(bountyId);
        uint256 submissionId = queue[b.reviewCursor];
        Submission storage s = _submissions[submissionId];
        if (s.status != SubmissionStatus.Submitted) revert WrongSubmissionStatus(submissionId, s.status);
        if (block.timestamp <= s.reviewDeadline) revert ReviewWindowOpen(submissionId);
        s.status = SubmissionStatus.Accepted;
        b.status = BountyStatus.Resolved;
        b.liveSubmissions -= 1;
        uint256 payout = b.rewardAmount + s.bondAmount;
        emit BountyFinalized(bountyId, submissionId, s.claimant, payout);
        _credit(s.claimant, payout);
    }

    /// @notice Returns the reward to the poster of an expired bounty that nobody can still win.
    function refundExpired(uint256 bountyId) external {
        Bounty storage b = _bounty(bountyId);
        if (b.status != BountyStatus.Open) revert BountyNotOpen(bountyId);
        if (block.timestamp <= b.deadline) revert BountyDeadlineNotReached(bountyId);
        if (b.liveSubmissions != 0) revert SubmissionsPending(bountyId);
        b.status = BountyStatus.Refunded;
        emit BountyRefunded(bountyId, b.poster, b.rewardAmount);
        _credit(b.poster, b.rewardAmount);
    }

    /// @notice Returns the bond of a submission still `submitted` once its bounty is closed.
    function refundSubmissionBond(uint256 submissionId) external {
        Submission storage s = _submission(submissionId);
        Bounty storage b = _bounties[s.bountyId];
        if (b.status == BountyStatus.Open) revert BountyStillOpen(s.bountyId);
        if (s.status != SubmissionStatus.Submitted) revert WrongSubmissionStatus(submissionId, s.status);
        s.status = SubmissionStatus.Refunded;
        b.liveSubmissions -= 1;
        emit SubmissionRefunded(submissionId, s.bountyId, s.claimant, s.bondAmount);
        _credit(s.claimant, s.bondAmount);
    }

    /// @notice Pays the caller's credited balance to the caller.
    function withdraw() external {
        _withdraw(msg.sender);
    }

    /// @notice Pays the caller's credited balance to `recipient`.
    function withdrawTo(address recipient) external {
        if (recipient == address(0)) revert ZeroAddress();
        _withdraw(recipient);
    }

    // ---------------------------------------------------------------- owner

    function setGrout(address grout, bool whitelisted) external onlyOwner {
        if (grout == address(0)) revert ZeroAddress();
        isGrout[grout] = whitelisted;
        emit GroutSet(grout, whitelisted);
    }

    function setParameters(uint16 postFeeBps_, uint16 submissionBondBps_, uint256 disputeBond_, uint64 reviewWindow_)
        external
        onlyOwner
    {
        if (
            postFeeBps_ > BPS_DENOMINATOR || submissionBondBps_ > BPS_DENOMINATOR || reviewWindow_ == 0
                || reviewWindow_ > MAX_REVIEW_WINDOW
        ) {
            revert InvalidParameters();
        }
        postFeeBps = postFeeBps_;
        submissionBondBps = submissionBondBps_;
        disputeBond = disputeBond_;
        reviewWindow = reviewWindow_;
        emit ParametersSet(postFeeBps_, submissionBondBps_, disputeBond_, reviewWindow_);
    }

    function setArbiter(address arbiter_) external onlyOwner {
        if (arbiter_ == address(0)) revert ZeroAddress();
        arbiter = arbiter_;
        emit ArbiterSet(arbiter_);
    }

    function setFeeRecipient(address feeRecipient_) external onlyOwner {
        if (feeRecipient_ == address(0)) revert ZeroAddress();
        feeRecipient = feeRecipient_;
        emit FeeRecipientSet(feeRecipient_);
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert ZeroAddress();
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }

    // ---------------------------------------------------------------- views

    /// @notice Post fee and submission bond for a reward, rounded down, and the poster's total funding.
    function quoteCreate(uint256 rewardAmount)
        external
        view
        returns (uint256 feeAmount, uint256 bondAmount, uint256 totalAmount)
    {
        (feeAmount, bondAmount) = _quote(rewardAmount);
        totalAmount = rewardAmount + feeAmount;
    }

    function getBounty(uint256 bountyId) external view returns (Bounty memory) {
        return _bounty(bountyId);
    }

    function getSubmission(uint256 submissionId) external view returns (Submission memory) {
        return _submission(submissionId);
    }

    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _dispute(disputeId);
    }

    function submissionQueue(uint256 bountyId) external view returns (uint256[] memory) {
        _bounty(bountyId);
        return _queues[bountyId];
    }

    // ---------------------------------------------------------------- internals

    function _bounty(uint256 bountyId) private view returns (Bounty storage b) {
        b = _bounties[bountyId];
        if (b.poster == address(0)) revert UnknownBounty(bountyId);
    }

    function _submission(uint256 submissionId) private view returns (Submission storage s) {
        s = _submissions[submissionId];
        if (s.claimant == address(0)) revert UnknownSubmission(submissionId);
    }

    function _dispute(uint256 disputeId) private view returns (Dispute storage d) {
        d = _disputes[disputeId];
        if (d.challenger == address(0)) revert UnknownDispute(disputeId);
    }

    /// @dev floor(amount * bps / 10000) without an intermediate overflow for any uint256 amount.
    function _bps(uint256 amount, uint256 bps) private pure returns (uint256) {
        return (amount / BPS_DENOMINATOR) * bps + ((amount % BPS_DENOMINATOR) * bps) / BPS_DENOMINATOR;
    }

    function _quote(uint256 rewardAmount) private view returns (uint256 fee, uint256 bond) {
        fee = _bps(rewardAmount, postFeeBps);
        bond = _bps(rewardAmount, submissionBondBps);
    }

    function _credit(address account, uint256 amount) private {
        uint256 balance = credits[account] + amount;
        credits[account] = balance;
        emit Credited(account, amount, balance);
    }

    function _withdraw(address recipient) private {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert NothingToWithdraw();
        credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, recipient, amount);
        if (!usdc.transfer(recipient, amount)) revert TokenTransferFailed();
    }

    function _pull(address from, uint256 amount) private {
        if (amount > 0 && !usdc.transferFrom(from, address(this), amount)) revert TokenTransferFailed();
    }
}
