"""The verl SFT dataset for `verl-swe rft build` parquet: verl's `MultiTurnSFTDataset` trains every
assistant message; this one trains only the turns whose action was well formed (P1 Sec. 4.2, Fig. 2)
and tokenizes each row exactly as the rollout did (verl_swe/rft/render.py), so SFT and RL see the same ids:
the assistant turns' sampled ids where the row has them (`assistant_token_ids_json`), else their text re-encoded.

    data.custom_cls.path=pkg://verl_swe.rft.dataset data.custom_cls.name=TrajectorySFTDataset

It keeps verl's data options: `max_length`, `truncation` (error | left | right), `pad_mode`
(no_padding | right), `apply_chat_template_kwargs`, `messages_key`, `train_max_samples`.
"""

from __future__ import annotations

import json

import torch
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
from verl.utils.py_functional import convert_nested_value_to_list_recursive

from verl_swe.agent.tokens import ChatTokens
from verl_swe.rft.render import token_ids

REQUIRED = ("assistant_loss_mask", "tools_json", "observation_role")


class TrajectorySFTDataset(MultiTurnSFTDataset):
    def _read_files_and_process(self):
        super()._read_files_and_process()  # reads the parquet files, applies max_samples, extracts messages
        missing = [c for c in REQUIRED if c not in self.dataframe.columns]
        if missing:
            raise ValueError(f"{self.parquet_files}: no column(s) {missing}; TrajectorySFTDataset reads the "
                             f"parquet written by `verl-swe rft build`")
        self.loss_flags = self.dataframe["assistant_loss_mask"].apply(convert_nested_value_to_list_recursive).tolist()
        self.tools_json = [str(x) for x in self.dataframe["tools_json"]]
        self.roles = [str(x) for x in self.dataframe["observation_role"]]
        sampled = self.dataframe.get("assistant_token_ids_json")  # absent in parquet built before ids were recorded
        self.sampled_ids = [json.loads(x) for x in sampled] if sampled is not None else [None] * len(self.dataframe)
        ids = self.dataframe["episode_id"] if "episode_id" in self.dataframe.columns else range(len(self.dataframe))
        self.names = [str(x) for x in ids]
        self._chats: dict[tuple[str, str], ChatTokens] = {}

    def _chat(self, tools_json: str, role: str) -> ChatTokens:
        if (tools_json, role) not in self._chats:  # learned once per tool set, like the agent runner does
            self._chats[tools_json, role] = ChatTokens(self.tokenizer, json.loads(tools_json), role,
                                                        dict(self.apply_chat_template_kwargs))
        return self._chats[tools_json, role]

    def __getitem__(self, item):
        chat = self._chat(self.tools_json[item], self.roles[item])
        ids, mask = token_ids(chat, self.messages[item], self.loss_flags[item], self.sampled_ids[item])
        input_ids = torch.tensor(ids, dtype=torch.long)
        loss_mask = torch.tensor(mask, dtype=torch.long)
        n = len(ids)
        if n > self.max_length:
            if self.truncation == "error":
                raise ValueError(f"row {item} ({self.names[item]}): {n} tokens > data.max_length={self.max_length}; "
                                 f"rebuild with `verl-swe rft build --max-tokens {self.max_length}` or raise max_length")
            # verl's semantics: "left" keeps the end of the conversation, "right" (and no_padding) the start
            keep = slice(-self.max_length, None) if self.truncation == "left" and self.pad_mode == "right" \
                else slice(0, self.max_length)
            input_ids, loss_mask = input_ids[keep], loss_mask[keep]
            n = self.max_length
        position_ids = torch.arange(n, dtype=torch.long)
        if self.pad_mode == "no_padding":
            return {"input_ids": input_ids, "position_ids": position_ids, "loss_mask": loss_mask}
        pad = self.max_length - n
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return {
            "input_ids": torch.cat([input_ids, torch.full((pad,), pad_id, dtype=torch.long)]),
            "attention_mask": torch.cat([torch.ones(n, dtype=torch.long), torch.zeros(pad, dtype=torch.long)]),
            "position_ids": torch.cat([position_ids, torch.zeros(pad, dtype=torch.long)]),
            "loss_mask": torch.cat([loss_mask, torch.zeros(pad, dtype=torch.long)]),
        }
