/**
 * The one error shape of the platform. Domain code throws `serviceError(code)`; one middleware turns
 * any ServiceError into the spec's envelope `{error:{type,code,message,param?,retry_after_seconds?}}`.
 * Each code's status and type live in CATALOG, so a code can never be sent with two different statuses.
 */
export type ErrorType =
  | 'authentication_error'
  | 'invalid_request_error'
  | 'permission_error'
  | 'rate_limit_error'
  | 'conflict_error'
  | 'not_found_error'
  | 'payment_required'
  | 'api_error'
  | 'not_implemented';

interface ErrorSpec {
  status: number;
  type: ErrorType;
  message: string;
}

const CATALOG = {
  // Authentication and authorization (spec 1, "Authentication and authorization").
  missing_token: { status: 401, type: 'authentication_error', message: 'No Authorization header was sent.' },
  invalid_auth_scheme: {
    status: 401,
    type: 'authentication_error',
    message: "The Authorization header must start with 'Bearer ' or 'Client '.",
  },
  invalid_token_format: {
    status: 401,
    type: 'authentication_error',
    message: "The Bearer credential is not a developer API key: it must be 'ko_' followed by 64 lowercase hex characters.",
  },
  invalid_token: { status: 401, type: 'authentication_error', message: 'The API key is unknown, revoked or expired.' },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'The API key is missing or revoked.' },
  invalid_client_token: { status: 401, type: 'authentication_error', message: 'The client token is invalid, revoked or expired.' },
  invalid_provisioning_key: {
    status: 401,
    type: 'authentication_error',
    message: "This route needs a provisioning key: 'Authorization: Bearer rsk_<64 hex>'. The key sent is missing, malformed or revoked.",
  },
  insufficient_scope: { status: 403, type: 'permission_error', message: 'The API key lacks the scope this route needs.' },
  endpoint_not_allowed_for_client_token: {
    status: 403,
    type: 'permission_error',
    message: 'Client tokens cannot call this endpoint; use a developer API key from your server.',
  },

  // Request shape.
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'The request is invalid.' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is larger than this endpoint accepts.' },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    message: 'The request body encoding or charset is not supported; send UTF-8 JSON.',
  },
  not_found: { status: 404, type: 'not_found_error', message: 'No such resource.' },
  concurrent_change: { status: 409, type: 'conflict_error', message: 'Another request changed the same resource at the same moment; read it again and retry.' },

  origin_not_allowed: { status: 403, type: 'permission_error', message: 'The Origin header is missing or not in this client token\'s allowlist.' },
  ip_binding_violation: { status: 403, type: 'permission_error', message: 'This client token is bound to another IP address.' },
  dashboard_origin_mismatch: { status: 403, type: 'permission_error', message: 'Dashboard changes must come from the dashboard itself (Origin mismatch).' },

  // Rate limits (spec 1, "Rate limits and wallets"); each carries retry_after_seconds and Retry-After.
  edge_rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Too many requests from this address and credential.' },
  developer_rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'This developer account is over its request or token rate limit.' },
  customer_rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'This customer is over its request or token rate limit.' },
  client_token_rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'This client token is over its requests-per-minute limit.' },
  lazy_create_rate_exceeded: { status: 429, type: 'rate_limit_error', message: 'Too many customers were created on first use; create customers explicitly or retry later.' },
  mint_rate_limit: { status: 429, type: 'rate_limit_error', message: 'More than 100 client tokens were minted for this customer in the last minute.' },
  rate_limited: { status: 429, type: 'rate_limit_error', message: 'Too many provisioning calls with this key in the last minute.' },

  // Wallets and budgets.
  wallet_empty: { status: 402, type: 'payment_required', message: 'The developer wallet cannot pay for this call. Top it up.' },
  customer_wallet_empty: { status: 402, type: 'payment_required', message: "The customer's prepaid wallet cannot pay for this call." },
  customer_budget_exceeded: { status: 402, type: 'payment_required', message: "The customer's monthly budget is spent until the calendar month rolls (UTC)." },
  insufficient_funds: { status: 402, type: 'payment_required', message: 'The developer wallet cannot fund this grant.' },
  invalid_amount: { status: 400, type: 'invalid_request_error', message: 'The amount must be a non-zero finite number.' },
  amount_too_large: { status: 400, type: 'invalid_request_error', message: 'The amount is over the per-call limit.' },
  wallet_error: { status: 500, type: 'api_error', message: 'The wallet ledger could not be written; nothing was charged. Retry with backoff.' },

  // Customers and metadata.
  customer_not_found: { status: 404, type: 'not_found_error', message: 'No such customer, and it was not created on first use.' },
  external_id_taken: { status: 409, type: 'conflict_error', message: 'Another customer of this developer already has that external_id.' },
  empty_patch: { status: 400, type: 'invalid_request_error', message: 'The patch names no updatable field.' },
  billable_defaults_mutex: {
    status: 400,
    type: 'invalid_request_error',
    message: 'default_billable_markup_pct and default_billable_amount_usd cannot both be set.',
  },
  invalid_rpm_limit: { status: 400, type: 'invalid_request_error', message: 'rpm_limit must be a positive integer.' },
  invalid_tpm_limit: { status: 400, type: 'invalid_request_error', message: 'tpm_limit must be a positive integer.' },
  invalid_monthly_budget_usd: { status: 400, type: 'invalid_request_error', message: 'monthly_budget_usd must be a non-negative number.' },
  invalid_default_billable_markup_pct: { status: 400, type: 'invalid_request_error', message: 'default_billable_markup_pct must be a non-negative number.' },
  invalid_default_billable_amount_usd: { status: 400, type: 'invalid_request_error', message: 'default_billable_amount_usd must be a non-negative number.' },
  invalid_lazy_create_customers: { status: 400, type: 'invalid_request_error', message: 'lazy_create_customers must be a boolean.' },
  invalid_external_id: { status: 400, type: 'invalid_request_error', message: 'external_id must be 1-256 printable characters.' },
  invalid_metadata: { status: 400, type: 'invalid_request_error', message: 'metadata must be an object of string values (keys up to 64, values up to 512 characters).' },
  metadata_too_many_keys: { status: 400, type: 'invalid_request_error', message: 'metadata has more than 16 keys.' },
  metadata_too_large: { status: 400, type: 'invalid_request_error', message: 'metadata is larger than its serialized size limit.' },

  // Client tokens.
  invalid_ttl: { status: 400, type: 'invalid_request_error', message: 'ttl_seconds must be an integer from 60 to 3600.' },
  invalid_origin_allowlist: { status: 400, type: 'invalid_request_error', message: 'origin_allowlist entries must be non-empty strings of at most 512 characters.' },
  rpm_exceeds_customer_cap: { status: 400, type: 'invalid_request_error', message: "rpm_limit is above the customer's rpm_limit." },
  invalid_scope: { status: 400, type: 'invalid_request_error', message: 'scope must be a subset of chat, conversations, embeddings, moderations, assistants_threads.' },

  // Accounts (spec 1, "Accounts").
  account_not_found: { status: 404, type: 'not_found_error', message: 'No such account under this developer.' },
  account_exists: { status: 409, type: 'conflict_error', message: 'The email or username is already in use.' },
  cap_reached: { status: 403, type: 'permission_error', message: 'The active-account limit is reached; close an account first.' },

  // Model references (spec 1, "Model references", "Region suffixes"); param is always model.
  invalid_model_ref: { status: 400, type: 'invalid_request_error', message: 'model must be a typed reference such as svc:<provider>/<model> or match:<provider>/<family>.' },
  unsupported_provider: { status: 400, type: 'invalid_request_error', message: 'That provider or region is not supported for this reference.' },
  unknown_slot: { status: 400, type: 'invalid_request_error', message: 'No slot with that alias is defined.' },
  slot_cycle: { status: 400, type: 'invalid_request_error', message: 'The slot aliases refer to each other in a cycle.' },
  unknown_dynamic_profile: { status: 400, type: 'invalid_request_error', message: 'No dynamic profile with that name is defined.' },
  byok_not_supported: { status: 400, type: 'invalid_request_error', message: 'user: references (your own upstream keys) are not supported.' },
  missing_model: { status: 400, type: 'invalid_request_error', message: 'model is required.' },

  // Chat completions (spec 1, "Chat, embeddings, rerank").
  missing_messages: { status: 400, type: 'invalid_request_error', message: 'messages must be a non-empty array.' },
  messages_too_large: { status: 400, type: 'invalid_request_error', message: 'The serialized messages are over 100,000 bytes.' },
  invalid_model_for_chat: { status: 400, type: 'invalid_request_error', message: 'That model is not a chat model.' },
  content_part_limit_exceeded: { status: 400, type: 'invalid_request_error', message: 'A message carries more than two image parts or two document parts.' },
  content_part_too_large: { status: 400, type: 'invalid_request_error', message: 'A content part is larger than allowed (images and documents 20 MB, audio 25 MB, decoded).' },
  invalid_content_part: { status: 400, type: 'invalid_request_error', message: 'A content part is malformed or of an unsupported kind.' },
  content_parts_unsupported_by_model: { status: 400, type: 'invalid_request_error', message: 'The model cannot take that kind of content part.' },
  fallback_with_stream_unsupported: { status: 400, type: 'invalid_request_error', message: 'A model cascade cannot be combined with stream: true.' },
  fallback_with_idempotency_unsupported: { status: 400, type: 'invalid_request_error', message: 'A model cascade cannot be combined with an idempotency-key.' },
  streaming_with_schema_fallback_unsupported: { status: 400, type: 'invalid_request_error', message: 'A json_schema response with stream: true cannot use a model cascade.' },
  missing_input: { status: 400, type: 'invalid_request_error', message: 'input must be a non-empty string or array of strings.' },
  invalid_input: { status: 400, type: 'invalid_request_error', message: 'input must be a string or an array of strings.' },
  input_too_large: { status: 400, type: 'invalid_request_error', message: 'input has more than 2,048 entries or an entry over 100,000 characters.' },
  invalid_embedding_model: { status: 400, type: 'invalid_request_error', message: 'model must be one of the supported embedding ids.' },
  invalid_dimensions: { status: 400, type: 'invalid_request_error', message: 'dimensions must be a positive integer no larger than the model’s own.' },
  idempotency_key_in_progress: { status: 409, type: 'conflict_error', message: 'The first request with this idempotency-key is still running; retry shortly.' },
  idempotency_key_reuse: { status: 409, type: 'conflict_error', message: 'This idempotency-key was already used with a different request body.' },
  unsupported_rerank_model: { status: 400, type: 'invalid_request_error', message: 'model must be one of the four rerank references.' },
  missing_documents: { status: 400, type: 'invalid_request_error', message: 'documents must be a non-empty array.' },
  too_many_documents: { status: 400, type: 'invalid_request_error', message: 'documents has more than 1,000 entries.' },
  query_too_large: { status: 400, type: 'invalid_request_error', message: 'query is over 10,000 characters.' },
  document_too_large: { status: 400, type: 'invalid_request_error', message: 'A document is over 100,000 characters.' },
  invalid_multipart: { status: 400, type: 'invalid_request_error', message: 'The body must be multipart/form-data.' },
  missing_file: { status: 400, type: 'invalid_request_error', message: 'The multipart body has no file part.' },
  missing_filename: { status: 400, type: 'invalid_request_error', message: 'The file part has no filename.' },
  moderation_flagged: { status: 400, type: 'invalid_request_error', message: 'Inline moderation flagged the prompt or the completion.' },
  malformed_json: { status: 400, type: 'invalid_request_error', message: 'The request body must be a JSON object.' },
  response_schema_validation_failed: { status: 422, type: 'invalid_request_error', message: 'The model output did not match the json_schema after re-prompting.' },
  upstream_rejected_request: { status: 400, type: 'invalid_request_error', message: 'The provider refused the request as invalid.' },
  platform_not_configured: { status: 503, type: 'api_error', message: 'No upstream credentials are configured for the resolved model.' },
  upstream_unavailable: { status: 503, type: 'api_error', message: 'The provider failed and no cascade entry succeeded. Retry with backoff.' },

  // Webhooks (spec 1, "Webhooks").
  invalid_url: { status: 400, type: 'invalid_request_error', message: 'url is required: an https URL of your receiver.' },
  insecure_webhook_url: { status: 400, type: 'invalid_request_error', message: 'url must use https.' },
  malformed_webhook_url: { status: 400, type: 'invalid_request_error', message: 'url is not a valid URL, or its host is private or otherwise unsafe.' },
  empty_events: { status: 400, type: 'invalid_request_error', message: 'events must be a non-empty array of event types.' },
  unknown_event_type: { status: 400, type: 'invalid_request_error', message: 'events names a type that is not registered.' },
  invalid_rotation_grace: { status: 400, type: 'invalid_request_error', message: 'rotation_grace_minutes must be an integer from 0 to 10080 (7 days).' },
  webhook_url_in_use: { status: 409, type: 'conflict_error', message: 'Another webhook endpoint of this developer already has that url.' },
  invalid_status_transition: { status: 400, type: 'invalid_request_error', message: 'That status change is not allowed.' },
  delivery_not_retryable: { status: 409, type: 'conflict_error', message: 'Only a dead delivery can be retried.' },

  // Files and batches (spec 1, "Assistants, threads, runs, batches, files").
  missing_purpose: { status: 400, type: 'invalid_request_error', message: 'purpose is required: batch, attachments, vision, assistants or user_data.' },
  invalid_purpose: { status: 400, type: 'invalid_request_error', message: 'purpose must be one of batch, attachments, vision, assistants, user_data.' },
  missing_input_file_id: { status: 400, type: 'invalid_request_error', message: 'input_file_id is required: the id of a file uploaded with purpose batch.' },
  input_file_wrong_purpose: { status: 400, type: 'invalid_request_error', message: 'The input file was not uploaded with purpose batch.' },
  invalid_endpoint: { status: 400, type: 'invalid_request_error', message: 'endpoint must be /v1/chat/completions, /v1/embeddings or /v1/moderations.' },
  invalid_completion_window: { status: 400, type: 'invalid_request_error', message: 'completion_window must be 24h.' },
  batch_not_cancellable: { status: 409, type: 'conflict_error', message: 'Only a batch that is validating or in progress can be cancelled.' },

  // Vector stores (spec 1, "Vector stores").
  invalid_name: { status: 400, type: 'invalid_request_error', message: 'name must be a non-empty string.' },
  name_too_long: { status: 400, type: 'invalid_request_error', message: 'name is over 256 bytes.' },
  missing_embedding_model: { status: 400, type: 'invalid_request_error', message: 'embedding_model is required: one of the supported embedding ids.' },
  invalid_encryption: { status: 400, type: 'invalid_request_error', message: 'encryption is not one of the values this resource takes.' },
  invalid_vector_sealing: { status: 400, type: 'invalid_request_error', message: 'vector_sealing must be none, source or full; source and full need an encrypted store.' },
  invalid_vector_index: { status: 400, type: 'invalid_request_error', message: 'vector_index must be auto, flat or ivf.' },
  ivf_requires_encryption: { status: 400, type: 'invalid_request_error', message: 'vector_index ivf needs an encrypted store with vector_sealing full.' },
  byok_key_required: { status: 400, type: 'invalid_request_error', message: 'A byok store needs key: {type: "passphrase", passphrase}.' },
  byok_passphrase_too_short: { status: 400, type: 'invalid_request_error', message: 'The passphrase must be at least 12 characters.' },
  byok_kms_unavailable: { status: 400, type: 'invalid_request_error', message: 'Only passphrase keys are available; no external key service is configured.' },
  not_a_byok_store: { status: 400, type: 'invalid_request_error', message: 'This vector store does not use a byok key.' },
  invalid_passphrase: { status: 400, type: 'invalid_request_error', message: 'The passphrase does not unlock this vector store.' },
  missing_passphrase: { status: 400, type: 'invalid_request_error', message: 'passphrase is required.' },
  vector_store_locked: { status: 409, type: 'conflict_error', message: 'This byok vector store is locked: unlock it (POST /v1/vector_stores/{id}/unlock) or send its passphrase in Svc-Vector-Store-Key.' },
  vector_store_unavailable: { status: 409, type: 'conflict_error', message: 'This vector store is being deleted.' },
  vector_store_suspended: { status: 402, type: 'payment_required', message: 'This vector store is suspended for non-payment.' },
  // Brains (spec 2, "Errors").
  invalid_brain_scope: { status: 400, type: 'invalid_request_error', message: 'scope must be a path such as / or /team/project.' },
  entry_read_only: { status: 409, type: 'conflict_error', message: 'This entry came with a pack (origin reference) and is read-only.' },
  preview_stale: { status: 409, type: 'conflict_error', message: 'What this forget would delete changed since its preview; preview it again.' },
  entry_too_large: { status: 413, type: 'invalid_request_error', message: 'An entry body may be at most 100 MB.' },
  brain_not_empty: { status: 409, type: 'conflict_error', message: "A brain's encryption can change only while it has no entries." },
  // Packs and mounts (spec 2, "Errors").
  resource_not_found: { status: 404, type: 'not_found_error', message: 'No such resource.' },
  invalid_visibility: { status: 400, type: 'invalid_request_error', message: 'visibility must be private, org, unlisted or public.' },
  missing_pack_id: { status: 400, type: 'invalid_request_error', message: 'pack_id is required.' },
  invalid_mode: { status: 400, type: 'invalid_request_error', message: 'mode must be reference or materialize.' },
  invalid_version: { status: 400, type: 'invalid_request_error', message: 'version must be the number of a version of this pack.' },
  invalid_scope_map: { status: 400, type: 'invalid_request_error', message: 'scope_map must be a flat object of source scope paths to target scope paths.' },
  missing_account_id: { status: 400, type: 'invalid_request_error', message: 'account_id is required.' },
  self_grant: { status: 400, type: 'invalid_request_error', message: 'A pack cannot be granted to the account that owns it.' },
  declassification_required: { status: 409, type: 'conflict_error', message: 'Publishing a sealed brain into a plaintext pack needs declassify: true.' },
  slug_taken: { status: 409, type: 'conflict_error', message: 'Another pack of this account has that slug.' },
  pack_too_large: { status: 409, type: 'conflict_error', message: 'The brain holds more than a pack may: at most 50,000 entries and 200,000 chunks.' },
  secret_detected: { status: 422, type: 'invalid_request_error', message: 'An entry holds a secret; nothing was published.' },
  embedding_model_mismatch: { status: 422, type: 'invalid_request_error', message: "The pack's embedding model or dimensions differ from the brain's." },
  pack_retired: { status: 409, type: 'conflict_error', message: 'This pack is retired: it takes no new mounts.' },
  no_published_version: { status: 409, type: 'conflict_error', message: 'This pack has no ready version yet.' },
  pack_version_not_ready: { status: 409, type: 'conflict_error', message: 'This version of the pack is not ready.' },
  mount_exists: { status: 409, type: 'conflict_error', message: 'This pack is already mounted on this brain.' },
  mount_limit: { status: 409, type: 'conflict_error', message: 'A brain takes at most 16 mounts.' },
  reference_requires_plaintext_pack: { status: 409, type: 'conflict_error', message: 'A reference mount needs a pack published with encryption none; use materialize.' },
  cross_account_reference_unsupported: { status: 409, type: 'conflict_error', message: 'A pack held through a grant can only be materialized, not referenced.' },
  reference_mount_limit: { status: 409, type: 'conflict_error', message: 'A brain takes at most one reference mount.' },
  pack_mounted: { status: 409, type: 'conflict_error', message: 'A pack is mounted on this brain: unmount it before a reindex.' },
  invalid_transcript: { status: 400, type: 'invalid_request_error', message: 'transcript must be lines of "user: ..." and "assistant: ...".' },
  proposal_decided: { status: 409, type: 'conflict_error', message: 'This proposal was already approved or rejected.' },
  conflict_resolved: { status: 409, type: 'conflict_error', message: 'This conflict was already resolved.' },
  reindex_in_progress: { status: 409, type: 'conflict_error', message: 'A reindex of this brain is already running.' },
  rollback_unavailable: { status: 409, type: 'conflict_error', message: 'Only a completed reindex can be rolled back, within 7 days of completing.' },
  vector_store_not_found: { status: 404, type: 'not_found_error', message: 'No such vector store.' },
  vector_store_file_not_found: { status: 404, type: 'not_found_error', message: 'No such file in this vector store.' },
  file_batch_not_found: { status: 404, type: 'not_found_error', message: 'No such file batch in this vector store.' },
  file_not_found: { status: 404, type: 'not_found_error', message: 'No such file.' },
  migration_not_found: { status: 404, type: 'not_found_error', message: 'No such migration of this vector store.' },
  migration_in_progress: { status: 409, type: 'conflict_error', message: 'A migration of this vector store is already running.' },
  file_not_cancellable: { status: 409, type: 'conflict_error', message: 'Only a pending or in-progress file can be cancelled.' },
  file_not_retryable: { status: 409, type: 'conflict_error', message: 'Only a failed or cancelled file can be retried.' },
  invalid_file_ids: { status: 400, type: 'invalid_request_error', message: 'file_ids must be a non-empty array of file ids.' },
  too_many_files: { status: 400, type: 'invalid_request_error', message: 'A file batch takes at most 500 files.' },

  // Conversations (spec 1, "Customers, metadata, conversations").
  invalid_status: { status: 400, type: 'invalid_request_error', message: 'status must be active, locked or archived.' },
  conversation_full: { status: 409, type: 'conflict_error', message: 'The conversation has reached its 5,000 messages.' },
  conversation_locked: { status: 409, type: 'conflict_error', message: 'A turn of this conversation is running; send the next message when it ends.' },
  conversation_archived: { status: 409, type: 'conflict_error', message: 'The conversation is archived; set its status to active to continue it.' },

  // Assistants, threads, runs (spec 1, "Assistants, threads, runs, batches, files").
  invalid_model: { status: 400, type: 'invalid_request_error', message: 'model must be a chat model reference of the gateway (svc:, match:, slot:, dyn:).' },
  invalid_tools: { status: 400, type: 'invalid_request_error', message: 'tools must be an array of at most 128 tools of type function or file_search.' },
  invalid_tool_schema: { status: 400, type: 'invalid_request_error', message: "A function tool's parameters must be a JSON Schema object." },
  invalid_tool_shape: { status: 400, type: 'invalid_request_error', message: 'A tool must be {type: "file_search"} or {type: "function", function: {name, description?, parameters?}} with a name of letters, digits, _ and -.' },
  invalid_temperature: { status: 400, type: 'invalid_request_error', message: 'temperature must be a number from 0 to 2.' },
  invalid_top_p: { status: 400, type: 'invalid_request_error', message: 'top_p must be a number from 0 to 1.' },
  invalid_messages: { status: 400, type: 'invalid_request_error', message: 'A message needs role user or assistant and content: a non-empty string or text parts.' },
  invalid_assistant_id: { status: 400, type: 'invalid_request_error', message: 'assistant_id must name one of your assistants.' },
  invalid_additional_messages: { status: 400, type: 'invalid_request_error', message: 'additional_messages must be an array of messages with role user or assistant and content.' },
  invalid_tool_call_id: { status: 400, type: 'invalid_request_error', message: 'tool_outputs must answer exactly the tool calls the run is waiting for, each once.' },
  assistant_name_in_use: { status: 409, type: 'conflict_error', message: 'Another active assistant of yours already has that name.' },
  thread_full: { status: 409, type: 'conflict_error', message: 'The thread has reached its 5,000 messages.' },
  thread_locked: { status: 409, type: 'conflict_error', message: 'The thread has an active run; wait for it to finish or cancel it.' },
  run_not_in_requires_action: { status: 409, type: 'conflict_error', message: 'Tool outputs are taken only while the run requires action.' },
  run_already_completed: { status: 409, type: 'conflict_error', message: 'The run has already finished.' },

  // Service side.
  internal_error: { status: 500, type: 'api_error', message: 'The service failed to handle the request. Retry with backoff.' },
  service_unavailable: { status: 503, type: 'api_error', message: 'A service this request needs is unavailable for the moment. Retry after the Retry-After seconds.' },
  shutting_down: { status: 503, type: 'api_error', message: 'This server is stopping. Retry: another replica, or this one restarted, will answer.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof CATALOG;

/** Every code the API can answer with, and every error type, for the API's published description. */
export const ERROR_CODES = Object.keys(CATALOG) as ErrorCode[];
export const ERROR_TYPES = [...new Set(Object.values(CATALOG).map((spec: ErrorSpec) => spec.type))];

export interface ErrorDetails {
  message?: string;
  /** The offending field, for field-validation errors only. */
  param?: string;
  /** For rate-limit errors; also sent as the Retry-After header. */
  retryAfterSeconds?: number;
}

export class ServiceError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: ErrorCode;
  readonly param: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, details: ErrorDetails = {}) {
    const spec: ErrorSpec = CATALOG[code];
    super(boundedMessage(details.message ?? spec.message));
    this.name = 'ServiceError';
    this.status = spec.status;
    this.type = spec.type;
    this.code = code;
    this.param = details.param;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/** The longest error message sent: one that quotes the caller's input (a 2 MB model name) quotes its start. */
export const MAX_ERROR_MESSAGE_CHARS = 1_000;

export function boundedMessage(message: string): string {
  return message.length <= MAX_ERROR_MESSAGE_CHARS ? message : `${message.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…`;
}

export function serviceError(code: ErrorCode, details?: ErrorDetails): ServiceError {
  return new ServiceError(code, details);
}

export interface ErrorEnvelope {
  error: {
    type: ErrorType;
    code: ErrorCode;
    message: string;
    param?: string;
    retry_after_seconds?: number;
  };
}

export function toEnvelope(error: ServiceError): ErrorEnvelope {
  return {
    error: {
      type: error.type,
      code: error.code,
      message: error.message,
      ...(error.param !== undefined && { param: error.param }),
      ...(error.retryAfterSeconds !== undefined && { retry_after_seconds: error.retryAfterSeconds }),
    },
  };
}
