"""The search's public types: parameters, the brief for one step, results, and views of a tree."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from adaexplore_mcp.models import Evaluation, RuleRef, Speedups, TensorSpec
from adaexplore_mcp.search import tree as T

STRATEGIES = ("adaexplore", "iterative_refinement", "parallel_sampling")
Strategy = Literal["adaexplore", "iterative_refinement", "parallel_sampling"]
MAX_BUDGET = 10_000
MAX_STEPS_AT_ONCE = 8  # next_step(count=...) and expand_nodes(items=...) take at most this many


class SearchParams(BaseModel):
    """Every constant of SEARCH.md, per search, with its published default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(default=T.ALPHA, ge=0, le=1, description="weight of max reward M in Q")
    c: float = Field(default=T.C_UCB, ge=0, description="UCB exploration constant")
    c_e: float = Field(default=T.C_EXPAND, ge=0, description="exploration constant of the 'new child' arm")
    p_large: float = Field(default=T.P_LARGE, ge=0, le=1, description="probability of a large step")
    max_small_children: int = Field(default=T.MAX_SMALL_CHILDREN, ge=0, description="small children before a large step is forced")
    memory_size: int = Field(default=T.MEMORY_SIZE, ge=0, le=50, description="working-memory length")
    pool_size: int = Field(default=T.POOL_SIZE, ge=0, le=50, description="representative-pool size")
    max_rules: int = Field(default=T.MAX_RULES, ge=0, le=20, description="validity rules shown per brief (0 withholds "
                           "them: the ablation of the skill memory)")
    reward_compile_error: float = T.REWARD_COMPILE_ERROR
    reward_failure: float = T.REWARD_FAILURE
    reward_base: float = T.REWARD_BASE
    reward_scale: float = T.REWARD_SCALE
    speedup_min: float = Field(default=T.SPEEDUP_MIN, gt=0)
    speedup_max: float = Field(default=T.SPEEDUP_MAX, gt=0)

    def reward(self, verdict: str, speedup: float | None) -> float:
        return T.reward(verdict, speedup, compile_error=self.reward_compile_error, failure=self.reward_failure,
                        base=self.reward_base, scale=self.reward_scale, s_min=self.speedup_min,
                        s_max=self.speedup_max)


class Edit(BaseModel):
    """One exact search/replace on the parent kernel; `old` must occur exactly once."""

    old: str
    new: str


class EvaluationSummary(BaseModel):
    """The compact evaluation shown in briefs."""

    verdict: str
    speedup: float | None = None
    speedups: str | None = Field(default=None, description="the speedup against every yardstick: eager, TF32, "
                                 "torch.compile, % of roofline (null when not timed)")
    precision: str | None = Field(default=None, description="set when a pass computes below the task's "
                                  "precision: why, and that it is ranked against the TF32 reference")
    error: str | None = Field(default=None, description="the error's key line (or mismatch/reject reason)")
    reward: float


class KernelRef(BaseModel):
    """A kernel of the tree as shown in a brief (trimmed to a size budget; full text at kernel_uri)."""

    node_id: int
    kind: Literal["large", "small"]
    note: str = ""
    evaluation: EvaluationSummary
    kernel: str | None = Field(default=None, description="source, possibly trimmed; null when omitted")
    kernel_truncated: bool = False
    kernel_uri: str


class TaskBrief(BaseModel):
    task_id: str
    name: str
    description: str = ""
    inputs: list[TensorSpec] = Field(default_factory=list)
    outputs: list[TensorSpec] = Field(default_factory=list)
    degenerate: bool = False
    reference_uri: str = Field(description="the full PyTorch reference source (an MCP resource)")


class BestSummary(BaseModel):
    node_id: int
    speedup: float | None
    reward: float
    kernel_uri: str


class MemoryEntry(KernelRef):
    """A node of the working memory. Only the parent is shown whole (as parent_kernel); every older node is a
    unified diff against the node after it in the chain, which is a few lines where the full source is kilobytes."""

    diff: str | None = Field(default=None, description="unified diff from node `diff_base` (the next node of the "
                             "chain) to this node; null for the parent (see parent_kernel)")
    diff_base: int | None = None


class Brief(BaseModel):
    """What the assistant needs for one step, or `done: true` when the budget is spent."""

    search_id: str
    done: bool = False
    step_id: str | None = None
    kind: Literal["large", "small"] | None = None
    parent_node_id: int | None = None
    parent_kernel: str | None = Field(default=None, description="small steps: the kernel to edit, in full")
    parent_kernel_uri: str | None = None
    parent_evaluation: EvaluationSummary | None = None
    parent_failure: str | None = Field(default=None, description="a failed parent's whole error or mismatch "
                                       "detail (small steps: what the repair must fix)")
    working_memory: list[MemoryEntry] = Field(default_factory=list, description="small steps: refinement chain, "
                                              "oldest first, the parent last; older nodes as diffs")
    pool: list[KernelRef] = Field(default_factory=list, description="large steps: best kernels of other branches")
    rules: list[RuleRef] = Field(default_factory=list, description="the validity rules most relevant to this step "
                                 "(the chain's failures, the parent's constructs); every kernel must respect them")
    rules_more: int = Field(default=0, description="how many other rules apply, all listed at rules_uri")
    rules_uri: str = "adaexplore://rules"
    task: TaskBrief | None = None
    reference_source: str | None = Field(default=None, description="the PyTorch reference, in the search's first "
                                         "brief; later: get_task(task_id) or task.reference_uri")
    evaluated_shapes: str = Field(default="", description="the shapes the judge actually runs the kernel at")
    strategy: str
    timing_available: bool
    gpu: str | None = None
    device: str = Field(default="", description="the GPU's name, or 'CPU interpreter, no timing'")
    timing_note: str = ""
    instructions: str = ""
    budget: int
    steps_used: int
    steps_left: int
    best: BestSummary | None = None
    same_as_first: list[str] = Field(default_factory=list, description="in more_steps: the fields left out here "
                                     "because they equal the top-level brief's (read them there)")
    same_parent_as: str | None = Field(default=None, description="in more_steps: this step grows from the same "
                                       "parent as step <same_parent_as> of this answer; its parent_kernel, "
                                       "parent_evaluation, parent_failure and working_memory are there")
    already_sent: bool = Field(default=False, description="this step's brief was handed out by an earlier call and "
                               "is unchanged; next_step(resend=true) repeats it whole")


class StepBrief(Brief):
    """One step's brief (the first step handed out) and, when several were asked for, the others."""

    more_steps: list[Brief] = Field(
        default_factory=list, description="next_step(count>1): the briefs of the other steps handed out with "
        "this one, each with its own step_id; fields equal to this brief's are left out (same_as_first)")


class ExpandResult(BaseModel):
    search_id: str
    step_id: str
    node_id: int
    kind: Literal["large", "small"]
    parent_node_id: int
    evaluation: Evaluation
    reward: float
    best: BestSummary | None
    is_new_best: bool
    steps_used: int
    steps_left: int
    done: bool
    ranked_speedup: float | None = Field(default=None, description="the speedup the search ranks and rewards "
                                         "this kernel by: vs strict fp32, or vs the TF32 reference when the "
                                         "kernel computes below the task's precision")
    ranked_against: Literal["fp32", "tf32"] | None = Field(default=None, description="the yardstick of "
                                                           "ranked_speedup")
    duplicate_of: int | None = Field(default=None, description="the node this kernel repeats (same source "
                                     "after normalization); its stored evaluation was reused, nothing was run")
    warnings: list[str] = Field(default_factory=list)
    next_step: StepBrief | None = Field(default=None, description="expand_node(next=k): the next k briefs, "
                                        "as next_step(count=k) would give them")


class ExpandItem(BaseModel):
    """One step's answer in expand_nodes: edits (small steps) or a full kernel_source, and a one-line note."""

    step_id: str
    kernel_source: str | None = None
    edits: list[Edit] | None = None
    note: str = ""


class ExpandItemResult(BaseModel):
    """One item's outcome: its result, or the error that stopped that item alone."""

    step_id: str
    ok: bool
    result: ExpandResult | None = None
    error: str | None = None


class ExpandBatch(BaseModel):
    search_id: str
    results: list[ExpandItemResult] = Field(description="one per item, in the order of the items")
    steps_used: int
    steps_left: int
    done: bool
    warnings: list[str] = Field(default_factory=list)
    next_step: StepBrief | None = Field(default=None, description="expand_nodes(next=k): the next k briefs")


class NodeView(BaseModel):
    node_id: int
    step_index: int = Field(description="order of creation; the root is 0, the first evaluated node 1")
    parent_id: int | None
    kind: Literal["root", "large", "small"]
    depth: int
    verdict: str | None
    speedup: float | None
    speedups: Speedups | None = Field(default=None, description="eager, TF32, torch.compile and % of roofline; "
                                      "null when not timed")
    reward: float | None
    visits: int
    total_reward: float = Field(description="W")
    mean_reward: float = Field(description="W / N")
    max_reward: float = Field(description="M")
    note: str = ""
    created_at: float
    kernel_source: str | None = None


class SearchSummary(BaseModel):
    search_id: str
    task_id: str
    strategy: str
    budget: int
    seed: int
    steps_used: int
    steps_left: int
    done: bool
    best_node_id: int | None
    best_speedup: float | None
    pending_step_id: str | None = Field(description="the oldest step handed out and not yet expanded")
    pending_step_ids: list[str] = Field(default_factory=list, description="every step handed out and not yet "
                                        "expanded (within its lease), oldest first")
    created_at: float
    updated_at: float


class SearchTree(SearchSummary):
    params: SearchParams
    nodes: list[NodeView]
    omitted_nodes: int = Field(default=0, description="nodes left out of `nodes` (get_search's max_nodes)")
    best_curve: list[float | None] = Field(
        description="after each step (index = step_index), the speedup of the best node so far (a timed pass "
        "outranks an untimed one; 1.0 while the best is untimed); null before any correct node"
    )


class BestKernel(BaseModel):
    search_id: str
    node_id: int
    step_index: int
    speedup: float | None
    verdict: str
    note: str
    kernel_uri: str
    kernel_source: str
    evaluation: Evaluation | None = None
