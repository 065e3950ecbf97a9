/* purpose-built book for lorescan lint: ls832 */
var dynamicLore = [
  { keywords: ['harbor'], scenario: 'The harbor.', triggers: ['gull'] },
  { tag: 'crew', scenario: 'The crew.' },
  { tag: 'gull', scenario: 'Gulls.', triggers: ['crew'] },
];
