// Types of the lorescan /v1 API (docs/service.md; the server's /openapi.json is the full schema).

export type BookRole = "global" | "character" | "character_extra" | "chat" | "persona";
export type Tokenizer = "cl100k" | "words" | "chars";

export interface BookLoss { entry: number | string | null; field: string; why: string; }

export interface BookInfo {
  id: string; name: string; format: string; entries: number; bytes: number; filename: string;
  losses: BookLoss[]; created?: boolean;
}

export interface STSettings {
  scan_depth?: number; budget_percent?: number; budget_cap?: number; min_activations?: number;
  min_activations_depth_max?: number; max_recursion_steps?: number; recursive?: boolean;
  case_sensitive?: boolean; match_whole_words?: boolean; use_group_scoring?: boolean; include_names?: boolean;
  insertion_strategy?: "evenly" | "character_first" | "global_first"; overflow_alert?: boolean;
  stable_placement?: boolean;
}

export interface STMessage { mes: string; name?: string; is_user?: boolean; }

export interface TimedEffectRecord { hash: number; start: number; end: number; protected: boolean; }
export interface TimedEffects { sticky: Record<string, TimedEffectRecord>; cooldown: Record<string, TimedEffectRecord>; }

export interface STScanRequest {
  books: { id: string; roles?: BookRole[] }[];
  messages: STMessage[];
  max_context: number;
  settings?: STSettings;
  compat?: "sillytavern" | "improved";
  character?: { name?: string; avatar?: string; tags?: string[] | null } | null;
  global_scan_data?: Record<string, string> | null;
  injects?: string[];
  authors_note?: string | null;
  trigger?: string;
  dry_run?: boolean;
  timed_effects?: TimedEffects | null;
  forced?: { world: string; uid: number | string }[];
  tokenizer?: Tokenizer;
  random?: number | null;
  seed?: number | null;
  macros?: Record<string, string> | null;
  explain?: boolean;
  chat_id?: string | null;
  // the delta form (docs/service.md#chat-delta); LorescanClient.stScan fills it in by itself
  prefix?: { count: number; digest: string } | null;
  // cache-stable placement (docs/improved-profile.md#cache-stable): the layout the previous turn returned
  layout?: Record<string, unknown> | null;
}

export interface EntryRef { world: string; uid: number | string; }

// How much of each placement text is unchanged from the layout sent (cache-stable placement).
export interface PlacementStability {
  share: number; length: number; unchanged: number; places: { place: string; length: number; unchanged: number }[];
}

// Where a key matched: the text, the span, the matched text in context, the unusual cases.
export interface KeySpan {
  key: string; kind: string; index: number; label: string; start: number; end: number; matched: string;
  before: string; after: string; inside_word: string | null; across: boolean; end_kind: string | null;
  end_index: number | null; end_label: string | null; source_entry: string | null;
  cases: ("inside_word" | "across" | "recursion")[];
}

export interface Diagnostic {
  world: string; uid: number | string; outcome: "activated" | "not_activated"; reason: string; detail: string;
  loop: number | null; key: string | null; where: string | null;
  span: KeySpan | null; text: string;
}

export interface STScanResponse {
  activated: EntryRef[];
  world_info_before: string;
  world_info_after: string;
  depth_entries: { depth: number; role: number; entries: string[] }[];
  an_top: string[];
  an_bottom: string[];
  em_entries: { position: number; content: string }[];
  outlets: Record<string, string[]>;
  authors_note: string | null;
  budget_overflowed: boolean;
  overflow_alert_shown: boolean;
  timed_effects: TimedEffects;
  loops: { state: string; next: string; activated: EntryRef[] }[];
  budget: number;
  diagnostics?: Diagnostic[] | null;
  regex_cutoffs?: string[];
  fuzzy_cutoffs?: string[];
  key_hit_cutoffs?: string[];
  layout?: Record<string, unknown> | null;
  placement_stability?: PlacementStability | null;
}

export interface SlotRunRequest {
  books: {
    id: string; book_id?: string | null;
    settings?: { scan_depth?: number | null; token_budget?: number | null; recursive_scanning?: boolean | null } | null;
  }[];
  messages: { role: "system" | "user" | "assistant"; content: string }[];
  turn_id: string | number;
  state?: Record<string, unknown> | null;
  dry_run?: boolean;
  at_greeting?: boolean | null;
  greeting_index?: number | null;
  user_icon?: string | null;
  user_icon_decorator?: boolean;
  regex_keys?: "ccv3" | "auto";
  rules?: "improved" | "sillytavern";
  case_sensitive?: boolean;
  match_whole_words?: boolean;
  tokenizer?: Tokenizer;
  macros?: Record<string, string> | null;
  chat_id?: string | null;
  stable_placement?: boolean;
}

export interface SlotLogRecord {
  book: string; id: number | string; name: string; outcome: string; reason: string; pass_number: number | null;
  matched_by: string | null; matched_key: string | null; roll: number | null; tokens: number | null;
  priority: number; order: number; role: string; ignore_on_max_context: boolean; position: [number, number];
  detail?: string | null; span?: KeySpan | null;
}

export interface SlotRunResponse {
  messages: { role: string; content: string }[];
  log: SlotLogRecord[];
  state: Record<string, unknown>;
  budget: number;
  tokens_used: number;
  passes: number;
  disabled_ui_prompts: string[];
  budget_book?: string | null;
  notes?: Record<string, unknown>[];
  regex_cutoffs?: string[];
  fuzzy_cutoffs?: string[];
  key_hit_cutoffs?: string[];
  placement_stability?: PlacementStability | null;
}

// POST /v1/janitor/run: one run of the JanitorAI script (docs/janitor-mode.md).
export interface JanitorRunRequest {
  book: unknown;
  context: unknown;
  settings?: { apply_limit?: unknown; window_depth?: unknown };
  profile?: "script" | "improved";
  random?: number[] | null;
  seed?: number | null;
  explain?: boolean;
}

export interface JanitorErrorOut { name: string; message: string; }

export interface JanitorRunResponse {
  personality: string | null;
  scenario: string | null;
  error: JanitorErrorOut | null;
  random_calls: number;
  trace: Record<string, unknown>;
  explain?: string[] | null;
}

export interface ErrorBody {
  error: string; path?: string; source?: string; entry?: number | string; field?: string; reasons?: string[];
  code?: "prefix_unknown";
}

export class LorescanError extends Error {
  status: number;
  body: ErrorBody;
  path?: string;
  constructor(status: number, body: ErrorBody);
}

export interface ClientOptions {
  token?: string; fetch?: typeof fetch; timeoutMs?: number;
  // default true: stScan with a chat_id sends only the new messages, and resends the chat on a 409
  delta?: boolean;
  // chats remembered for delta requests (default 1000)
  chats?: number;
}

/** The digest (64 hex digits) of these messages, as a delta request's prefix.digest names them. */
export function chatDigest(messages: STMessage[]): Promise<string>;

export class LorescanClient {
  constructor(baseUrl: string, options?: ClientOptions);
  deltaStats: { deltas: number; resends: number };
  health(): Promise<{ status: string }>;
  metrics(): Promise<string>;
  uploadBook(book: object | string | ArrayBuffer | Uint8Array | Blob,
             options?: { name?: string; filename?: string; fillDefaults?: boolean }): Promise<BookInfo>;
  getBook(id: string): Promise<BookInfo>;
  listBooks(): Promise<{ books: BookInfo[] }>;
  deleteBook(id: string): Promise<void>;
  stScan(request: STScanRequest): Promise<STScanResponse>;
  slotRun(request: SlotRunRequest): Promise<SlotRunResponse>;
  janitorRun(request: JanitorRunRequest): Promise<JanitorRunResponse>;
}
